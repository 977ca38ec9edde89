"""Offline check of the toy family's learnability: the same policy, GRPO update and advantage
rule as a real run, with the graders' reward rule evaluated in Python instead of sandboxes.
Usage: python3 trainer/simulate.py [steps] -- prints the mean reward per step."""

import random
import sys

import torch

import grpo
import toy
from model import Policy
from vocab import Vocab


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    torch.manual_seed(0)
    random.seed(0)
    torch.set_num_threads(1)
    v = Vocab()
    pol = Policy(len(v), v.action_ids)
    opt = torch.optim.Adam(pol.parameters(), lr=toy.LR)
    tasks = [t for t in toy.tasks(int(__import__("os").environ.get("TOY_NF", "24")), int(__import__("os").environ.get("TOY_NH", "8")))]
    for step in range(steps):
        chosen = random.sample(tasks, 8)
        groups, rewards = [], []
        for t in chosen:
            eps = []
            for _ in range(8):
                hint = random.choice(toy.WORDS_)
                prompt = v.encode(t["prompt"])
                comp, mask, lps, ws = [], [], [], {}
                for turn in range(t["max_turns"]):
                    toks, lp, _ = pol.generate([prompt + comp], [t["max_completion_tokens"]],
                                               1.0, v.eos, "cpu")[0]
                    comp += toks
                    mask += [1] * len(toks)
                    lps += lp
                    cmd = v.decode(toks)
                    if not cmd.strip():
                        break
                    out = toy.simulate_command(cmd, ws, hint)
                    if turn + 1 < t["max_turns"] and out:
                        o = v.encode(out)
                        comp += o
                        mask += [0] * len(o)
                        lps += [0.0] * len(o)
                r = toy.simulate_reward(t, ws, hint)
                eps.append(dict(prompt_ids=prompt, completion_ids=comp, loss_mask=mask,
                                sampling_logprobs=lps, reward=r))
            rs = torch.tensor([e["reward"] for e in eps])
            rewards += rs.tolist()
            if rs.std() > 0:
                adv = (rs - rs.mean()) / (rs.std() + 1e-6)
                for e, a in zip(eps, adv.tolist()):
                    e["advantage"] = a
                groups.append({"episodes": eps})
        grpo.train_step(pol, opt, groups, "cpu", epochs=toy.EPOCHS)
        print(f"step {step + 1}: reward {sum(rewards) / len(rewards):.3f}", flush=True)


if __name__ == "__main__":
    main()
