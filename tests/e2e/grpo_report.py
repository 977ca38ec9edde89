#!/usr/bin/python3
"""What a GRPO learning run reached: reads a training run's outputs (DIR/train: steps.jsonl,
step-NNNN.jsonl) and a held-out evaluation's (DIR/held_out: summary.json, written by
`sbx grpo --split held_out --no-train`), prints the reward and pass rate per step, over the last
LAST steps and on the held-out split, and writes them to DIR/learning.json.
With --eval DIR: evaluation runs without training (DIR/train, DIR/held_out: a task set's two
splits, `sbx grpo --no-train`): the pass rate, mean reward and infrastructure failures of each,
counted from their step logs, printed and written to DIR/rates.json.
Usage: grpo_report.py DIR [LAST] | grpo_report.py --eval DIR NAME"""

import glob
import json
import os
import sys


def step_stats(path):
    eps = [json.loads(ln) for ln in open(path) if ln.strip()]
    scored = [e for e in eps if e["status"] == "scored"]
    n = len(scored) or 1
    return {"reward": sum(e["reward"] for e in scored) / n,
            "pass": sum(1 for e in scored if e["reward"] >= 1) / n, "scored": len(scored)}


def eval_rates(out, name):
    rates = {}
    print(f"{name}: the policy as it is, no training, every task of each split once:")
    for split, label in (("train", "train split:   "), ("held_out", "held-out split:")):
        eps = [json.loads(ln) for p in sorted(glob.glob(os.path.join(out, split, "step-*.jsonl")))
               for ln in open(p) if ln.strip()]
        if not eps:
            sys.exit(f"grpo_report: no step logs under {out}/{split}")
        scored = [e for e in eps if e["status"] == "scored"]
        passed = sum(1 for e in scored if e["reward"] >= 1)
        n = len(scored)
        r = {"episodes": len(eps), "scored": n, "passed": passed,
             "pass_rate": passed / n if n else 0.0,
             "reward": sum(e["reward"] for e in scored) / n if n else 0.0,
             "infrastructure_failures": sum(1 for e in eps
                                            if e["status"] == "infrastructure_failure"),
             "turns": sum(e["turns"] for e in eps)}
        rates[split] = r
        print(f"  {label} pass rate {r['pass_rate']:.0%} ({passed}/{n} scored episodes passed), "
              f"mean reward {r['reward']:.3f}, {r['turns']} turns, infrastructure failures "
              f"{r['infrastructure_failures']}")
    with open(os.path.join(out, "rates.json"), "w") as f:
        json.dump(rates, f)
        f.write("\n")


def main():
    if sys.argv[1] == "--eval":
        return eval_rates(sys.argv[2], sys.argv[3])
    out = sys.argv[1]
    last = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    steps = [step_stats(p) for p in sorted(glob.glob(os.path.join(out, "train", "step-*.jsonl")))]
    if not steps:
        sys.exit(f"grpo_report: no step logs under {out}/train")
    train = json.load(open(os.path.join(out, "train", "summary.json")))
    tail = steps[-last:]
    rep = {
        "steps": len(steps), "seconds": train["seconds"],
        "reward_per_step": [round(s["reward"], 4) for s in steps],
        "pass_per_step": [round(s["pass"], 4) for s in steps],
        "first_reward": steps[0]["reward"],
        "last_reward": sum(s["reward"] for s in tail) / len(tail),
        "last_pass": sum(s["pass"] for s in tail) / len(tail),
        "last_steps": len(tail),
    }
    held = os.path.join(out, "held_out", "summary.json")
    if os.path.exists(held):
        h = json.load(open(held))
        rep.update(held_out_reward=h["last_reward_mean"], held_out_pass=h["pass_rate"],
                   held_out_episodes=h["scored"])
    print("step  reward  pass")
    for i, s in enumerate(steps, 1):
        print(f"{i:4d}  {s['reward']:.3f}  {s['pass']:4.0%}")
    print(f"training split, last {len(tail)} steps: mean reward {rep['last_reward']:.3f}, "
          f"pass rate {rep['last_pass']:.0%} (first step {rep['first_reward']:.3f}; "
          f"{rep['seconds']:.0f} s for {len(steps)} steps)")
    if "held_out_reward" in rep:
        print(f"held-out split (never trained on, {rep['held_out_episodes']} episodes): "
              f"mean reward {rep['held_out_reward']:.3f}, pass rate {rep['held_out_pass']:.0%}")
    with open(os.path.join(out, "learning.json"), "w") as f:
        json.dump(rep, f)
        f.write("\n")


if __name__ == "__main__":
    main()
