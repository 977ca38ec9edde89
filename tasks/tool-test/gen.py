#!/usr/bin/python3
"""Generates tasks/tool-test/tasks.jsonl: the brief's `environment: tool-test` manifest (64 tasks,
21 train and 43 held out, seed 42, max_turns 3, max_completion_tokens 256). Each task is a
multi-turn shell task: a setup file holds a value drawn with random.Random(42) that the prompt
does not state, so the agent must look (turn 1: cat) and then act (turn 2: write the answer).
Every instance has its own file name and expected answer, so no held-out answer equals a train one.
Run: python3 tasks/tool-test/gen.py > tasks/tool-test/tasks.jsonl"""
import json
import random

N, HELD_OUT = 64, 43
KINDS = [("copy", "Copy the word stored in {src} into answer.txt.", lambda w, n: w),
         ("upper", "Write the word stored in {src}, in capitals, into answer.txt.",
          lambda w, n: w.upper()),
         ("count", "Write the number of lines of {src} into answer.txt.", lambda w, n: str(n))]
WORDS = ["amber", "birch", "cedar", "delta", "ember", "fjord", "grove", "heron", "indigo",
         "juniper", "kelp", "lilac", "maple", "nectar", "onyx", "pebble", "quartz", "raven",
         "sorrel", "tundra", "umber", "violet", "willow", "xenon", "yarrow", "zephyr"]

TEST = """#!/bin/sh
# Hidden test of task {id}: /workspace/answer.txt holds the expected value. Exit 0 / 1.
f=/workspace/answer.txt
[ -f "$f" ] && [ ! -L "$f" ] || exit 1
[ "$(head -c 128 "$f" | tr -d '\\n')" = '{want}' ]
"""


def tasks():
    rng = random.Random(42)
    seen = set()
    while len(seen) < N:
        kind = KINDS[len(seen) % len(KINDS)]
        word, lines = rng.choice(WORDS), rng.randint(2, 60)
        src = "notes/%s-%d.txt" % (rng.choice(WORDS), rng.randint(100, 999))
        want = kind[2](word, lines)
        key = (kind[0], src, want)
        if any(k[1] == src or k[2] == want for k in seen):
            continue
        seen.add(key)
        body = (word + "\n") * lines if kind[0] == "count" else word + "\n"
        tid = "%s-%d" % (kind[0], len(seen))
        yield {"id": tid, "prompt": kind[1].format(src=src),
               "setup": {"files": {src: body}},
               "limits": {"cpu": 0.25, "memory": "128Mi", "disk": "16Mi", "pids": 32,
                          "timeout": "5m", "idle_timeout": "2m"},
               "max_turns": 3, "max_completion_tokens": 256, "command_timeout": "5s",
               "grader": {"files": {"test.sh": TEST.format(id=tid, want=want)},
                          "command": "sh test.sh", "timeout": "10s"}}


if __name__ == "__main__":
    print(json.dumps({"task_set": "tool-test@1", "split": {"seed": 42, "held_out": HELD_OUT / N}}))
    for t in tasks():
        print(json.dumps(t))
