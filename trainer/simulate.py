"""Offline check of the toy family's learnability: the same policy, GRPO update, advantage rule,
task order and train / held-out split as a real run (`sbx grpo --seed S`), with the shell and
the graders' reward rule modelled in Python instead of sandboxes (trainer/toy.py).
Usage: python3 trainer/simulate.py [steps [tasks-per-step [group-size]]]
prints per step the mean reward and pass rate; at the end the held-out split's."""

import os
import random
import sys

import torch

import grpo
import toy
from model import Policy
from vocab import Vocab

M64 = (1 << 64) - 1


def split_hash(seed, tid):
    """The runner's split hash (client/grpo/taskset.c): splitmix64 over FNV-1a of the id."""
    h = 1469598103934665603 ^ seed
    for b in tid.encode():
        h = ((h ^ b) * 1099511628211) & M64
    h = (h + 0x9E3779B97F4A7C15) & M64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) & M64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) & M64
    return h ^ (h >> 31)


def split(tasks, seed=7, fraction=0.25):
    k = round(len(tasks) * fraction)
    held = set(t["id"] for t in sorted(tasks, key=lambda t: (split_hash(seed, t["id"]),
                                                             t["id"]))[:k])
    return [t for t in tasks if t["id"] not in held], [t for t in tasks if t["id"] in held]


def episodes(pol, v, tasks, temperature):
    """One episode per task in `tasks`, sampled together (one batch per turn, as the trainer's
    batcher does)."""
    eps = []
    for t in tasks:
        eps.append(dict(task=t, ws={},
                        prompt_ids=v.encode(t["prompt"], eot=True), completion_ids=[], loss_mask=[],
                        sampling_logprobs=[], live=True))
    for turn in range(max(t["max_turns"] for t in tasks)):
        live = [e for e in eps if e["live"] and turn < e["task"]["max_turns"]]
        if not live:
            break
        res = pol.generate([e["prompt_ids"] + e["completion_ids"] for e in live],
                           [e["task"]["max_completion_tokens"] for e in live], temperature,
                           v.eos, "cpu")
        for e, (toks, lp, _) in zip(live, res):
            e["completion_ids"] += toks
            e["loss_mask"] += [1] * len(toks)
            e["sampling_logprobs"] += lp
            cmd = v.decode(toks)
            if not cmd.strip():
                e["live"] = False
                continue
            out = toy.simulate_command(cmd, e["ws"])
            if turn + 1 < e["task"]["max_turns"] and out:
                o = v.encode(out, eot=True)
                e["completion_ids"] += o
                e["loss_mask"] += [0] * len(o)
                e["sampling_logprobs"] += [0.0] * len(o)
    for e in eps:
        e["reward"] = toy.simulate_reward(e["task"], e["ws"])
    return eps


def main():
    a = [int(x) for x in sys.argv[1:]]
    steps, per_step, group = (a + [20, 8, 8][len(a):])[:3]
    torch.manual_seed(int(os.environ.get("SEED", "1")))
    random.seed(0)
    torch.set_num_threads(1)
    v = Vocab()
    pol = Policy(len(v), v.action_ids, names=v.name_ids)
    opt = torch.optim.Adam(pol.parameters(), lr=toy.LR)
    train, held = split(toy.tasks())
    random.shuffle(train)
    nxt = 0
    for step in range(steps):
        groups, rewards = [], []
        chosen = [train[(nxt + i) % len(train)] for i in range(per_step)]
        nxt += per_step
        batch = episodes(pol, v, [t for t in chosen for _ in range(group)], 1.0)
        for k in range(per_step):
            eps = batch[k * group:(k + 1) * group]
            rs = torch.tensor([e["reward"] for e in eps])
            rewards += rs.tolist()
            if rs.std() > 0:
                adv = rs - rs.mean() if os.environ.get("DR") else \
                    (rs - rs.mean()) / (rs.std() + 1e-6)
                for e, x in zip(eps, adv.tolist()):
                    e["advantage"] = x
                groups.append({"episodes": eps})
        if os.environ.get("SHOW") and step % 3 == 0:
            import collections
            c = collections.Counter(v.decode(e["completion_ids"]).replace(
                e["task"]["file"], "F").replace(e["task"]["word"], "W") for e in batch)
            print("   ", c.most_common(6))
        grpo.train_step(pol, opt, groups, "cpu", epochs=toy.EPOCHS, entropy=toy.ENTROPY)
        print(f"step {step + 1}: reward {sum(rewards) / len(rewards):.3f} "
              f"pass {sum(r >= 1 for r in rewards) / len(rewards):.0%}", flush=True)
    for name, ts in (("train", train), ("held_out", held)):
        eps = episodes(pol, v, [t for t in ts for _ in range(group)], 1.0)
        rs = [e["reward"] for e in eps]
        if os.environ.get("SHOW"):
            for e in eps[::group // 2]:
                print(f"  {e['task']['prompt']!r}: {v.decode(e['completion_ids'])!r} -> "
                      f"{e['reward']}")
        print(f"{name} ({len(ts)} tasks): reward {sum(rs) / len(rs):.3f} "
              f"pass {sum(r >= 1 for r in rs) / len(rs):.0%}")


if __name__ == "__main__":
    main()
