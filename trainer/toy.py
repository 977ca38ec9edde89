"""The toy task family: "write the right word into the right file" (one turn, the answer is
fixed per task id) and a multi-turn variant that must read hint.txt first (the word is drawn per
episode by the setup). Graders are hidden shell tests that score by exit status.

python3 trainer/toy.py > tasks/toy-files.jsonl  writes the task set (deterministic).
It also holds the Python model of the reward rule used by trainer/simulate.py."""

import json
import random

from vocab import FILES as FILES_
from vocab import WORDS as WORDS_

LR = float(__import__("os").environ.get("TOY_LR", "0.01"))
EPOCHS = int(__import__("os").environ.get("TOY_EPOCHS", "2"))
REWARDS = {"0": 1.0, "10": 0.4, "11": 0.15, "1": 0.0}
LIMITS = {"cpu": 0.25, "memory": "128Mi", "disk": "16Mi", "pids": 32, "timeout": "5m",
          "idle_timeout": "2m"}

GRADER = """#!/bin/sh
# Hidden test of task {id}. Exit 0: {file} holds the word; 10: {file} exists with another
# content; 11: only some other file was written; 1: nothing. Anything else is a grader failure.
want={want}
f=/workspace/{file}
if [ ! -f "$f" ] || [ -L "$f" ]; then
  for g in /workspace/*.txt; do
    [ -f "$g" ] && [ "${{g##*/}}" != hint.txt ] && exit 11
  done
  exit 1
fi
[ "$(head -c 64 "$f")" = "$want" ] && exit 0
exit 10
"""


def tasks(n_files=24, n_hint=8, seed=1):
    rng = random.Random(seed)
    out = []
    for i in range(n_files):
        f, w = rng.choice(FILES_), rng.choice(WORDS_)
        out.append({
            "id": f"k{i}", "prompt": f"task k{i}", "limits": LIMITS, "max_turns": 1,
            "max_completion_tokens": 6, "command_timeout": "5s", "file": f, "word": w,
            "grader": {"files": {"test.sh": GRADER.format(id=f"k{i}", file=f, want=w)},
                       "command": "sh test.sh", "timeout": "10s",
                       "reward": {"exit_codes": REWARDS}},
        })
    for i in range(n_hint):
        f = FILES_[i % len(FILES_)]
        out.append({
            "id": f"h{i}", "prompt": f"hint h{i}", "limits": LIMITS, "max_turns": 2,
            "max_completion_tokens": 6, "command_timeout": "5s", "file": f, "word": None,
            "setup": {"commands": ["shuf -n1 -e " + " ".join(WORDS_) + " > hint.txt"]},
            "grader": {"files": {"test.sh": GRADER.format(
                id=f"h{i}", file=f, want='"$(head -c 64 /workspace/hint.txt)"')},
                       "command": "sh test.sh", "timeout": "10s",
                       "reward": {"exit_codes": REWARDS}},
        })
    return out


def simulate_command(cmd, ws, hint):
    """A model of what sh does with the toy vocabulary: returns the output, updates ws."""
    words = cmd.split()
    out, target = "", None
    if ">" in words:
        k = words.index(">")
        if k + 1 < len(words):
            target = words[k + 1]
        words = words[:k]
    if words[:1] == ["echo"]:
        out = " ".join(words[1:])
    elif words[:1] == ["cat"] and len(words) > 1:
        out = " ".join((hint if w == "hint.txt" else (ws.get(w) or "")) for w in words[1:])
    elif words:
        out = ""  # "not found" goes to stderr; the redirect still creates the file
    if target is not None and target.endswith(".txt"):
        ws[target] = out
        return ""
    return out


def simulate_reward(t, ws, hint):
    want = t["word"] or ws.get("hint.txt", hint)
    f = t["file"]
    if f in ws:
        return 1.0 if ws[f].strip() == want else 0.4
    return 0.15 if any(k != "hint.txt" for k in ws) else 0.0


def main():
    print(json.dumps({"task_set": "toy-files@1", "split": {"seed": 7, "held_out": 0.25}}))
    for t in tasks():
        t = {k: v for k, v in t.items() if k not in ("file", "word")}
        print(json.dumps(t))


if __name__ == "__main__":
    main()
