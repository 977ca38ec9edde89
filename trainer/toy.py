"""The toy task family: "put a word into a file", the word and the file named in the prompt.

  write red to b.txt   -> echo red > b.txt      (also "> b.txt echo red")
  put gold in d.txt    -> echo gold > d.txt

One task per word x file x phrasing (4 x 4 x 2 = 32). The prompt carries everything the answer
needs, so one skill (turn the prompt's word and file into a command) solves every task, and the
held-out tasks (word/file/phrasing triples never trained on) measure whether the policy learned
that skill rather than memorised task ids. Graders are hidden shell tests that score by exit
status: 1.0 the right word in the right file; 0.6 the right file with other content; 0.4 the
right file empty, or the right word in another file; 0.1 another .txt file; 0 nothing.

python3 trainer/toy.py > tasks/toy-files.jsonl  writes the task set (deterministic).
It also holds the Python model of the shell and of the reward rule used by trainer/simulate.py,
and the trainer's defaults (TOY_LR, TOY_EPOCHS, TOY_ENTROPY in the environment override them,
for simulate.py sweeps)."""

import json
import os

from vocab import FILES as FILES_
from vocab import WORDS as WORDS_

LR = float(os.environ.get("TOY_LR", "0.01"))
EPOCHS = int(os.environ.get("TOY_EPOCHS", "2"))
ENTROPY = float(os.environ.get("TOY_ENTROPY", "0.1"))
REWARDS = {"0": 1.0, "13": 0.6, "10": 0.4, "12": 0.4, "11": 0.1, "1": 0.0}
LIMITS = {"cpu": 0.25, "memory": "128Mi", "disk": "16Mi", "pids": 32, "timeout": "5m",
          "idle_timeout": "2m"}
MAX_TOKENS = 4  # echo W > F: the answer's length, no room for trailing words

GRADER = """#!/bin/sh
# Hidden test of task {id}. Exit 0: {file} holds the word; 13: {file} holds something else;
# 10: {file} is empty; 12: the word is in another file; 11: only other files were written;
# 1: nothing. Anything else is a grader failure.
want={want}
f=/workspace/{file}
if [ -f "$f" ] && [ ! -L "$f" ]; then
  got=$(head -c 64 "$f")
  [ "$got" = "$want" ] && exit 0
  [ -n "$got" ] && exit 13
  exit 10
fi
other=
for g in /workspace/*.txt; do
  [ -f "$g" ] && [ ! -L "$g" ] || continue
  [ "$(head -c 64 "$g")" = "$want" ] && exit 12
  other=1
done
[ -n "$other" ] && exit 11
exit 1
"""


def task(tid, prompt, f, w):
    return {"id": tid, "prompt": prompt, "limits": LIMITS, "max_turns": 1,
            "max_completion_tokens": MAX_TOKENS, "command_timeout": "5s", "file": f, "word": w,
            "grader": {"files": {"test.sh": GRADER.format(id=tid, file=f, want=w)},
                       "command": "sh test.sh", "timeout": "10s",
                       "reward": {"exit_codes": REWARDS}}}


def tasks():
    out = []
    for w in WORDS_:
        for f in FILES_:
            out.append(task(f"w-{w}-{f[0]}", f"write {w} to {f}", f, w))
            out.append(task(f"p-{w}-{f[0]}", f"put {w} in {f}", f, w))
    return out


def simulate_command(cmd, ws):
    """A model of what sh does with the action words (every `> F` opens F, the last one gets
    stdout; echo prints its words; anything else is "not found", on stderr). Returns stdout,
    updates ws (file -> content)."""
    words, args, targets = cmd.split(), [], []
    i = 0
    while i < len(words):
        if words[i] == ">":
            if i + 1 >= len(words) or words[i + 1] == ">":
                return "syntax error"
            targets.append(words[i + 1])
            i += 2
        else:
            args.append(words[i])
            i += 1
    out = ""
    if args[:1] == ["echo"]:
        out = " ".join(args[1:])
    for t in targets:
        ws[t] = ""
    if targets:
        ws[targets[-1]] = out
        return ""
    return out


def simulate_reward(t, ws):
    want, f = t["word"], t["file"]
    if f in ws:
        got = ws[f].strip()
        return 1.0 if got == want else 0.6 if got else 0.4
    files = [k for k in ws if k.endswith(".txt")]
    if any(ws[k].strip() == want for k in files):
        return 0.4
    return 0.1 if files else 0.0


def main():
    print(json.dumps({"task_set": "toy-files@2", "split": {"seed": 7, "held_out": 0.25}}))
    for t in tasks():
        t = {k: v for k, v in t.items() if k not in ("file", "word")}
        print(json.dumps(t))


if __name__ == "__main__":
    main()
