"""The GRPO update: clipped probability ratio against the sampling log-probabilities, weighted by
the runner's advantages, on the tokens the policy sampled (loss_mask 1)."""

import torch


def check_episode(ep):
    """Raises ValueError naming what is wrong with one episode of a train_step body."""
    for k in ("prompt_ids", "completion_ids", "loss_mask", "sampling_logprobs", "advantage"):
        if k not in ep:
            raise ValueError(f"episode lacks \"{k}\"")
    n = len(ep["completion_ids"])
    if len(ep["loss_mask"]) != n or len(ep["sampling_logprobs"]) != n:
        raise ValueError("completion_ids, loss_mask and sampling_logprobs differ in length")
    if not ep["prompt_ids"]:
        raise ValueError("empty prompt_ids")


def grpo_loss(policy, episodes, device, clip=0.2, entropy=0.0):
    """Mean over episodes of the mean clipped surrogate over their sampled tokens, plus
    `entropy` times the mean entropy of the policy at those tokens (an exploration bonus)."""
    seqs = [ep["prompt_ids"] + ep["completion_ids"] for ep in episodes]
    width = max(len(s) for s in seqs)
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    mask = torch.zeros((len(seqs), width - 1))
    old = torch.zeros((len(seqs), width - 1))
    adv = torch.tensor([float(ep["advantage"]) for ep in episodes])
    for i, (s, ep) in enumerate(zip(seqs, episodes)):
        ids[i, : len(s)] = torch.tensor(s)
        p = len(ep["prompt_ids"])
        n = len(ep["completion_ids"])
        # target position j predicts token j+1: completion token k sits at p+k, predicted at p+k-1
        mask[i, p - 1 : p - 1 + n] = torch.tensor(ep["loss_mask"], dtype=torch.float)
        old[i, p - 1 : p - 1 + n] = torch.tensor(ep["sampling_logprobs"], dtype=torch.float)
    ids, mask, old, adv = ids.to(device), mask.to(device), old.to(device), adv.to(device)
    logp = policy(ids[:, :-1])  # [B, T-1, A]: over the action words
    slot = policy.slot[ids[:, 1:]]
    new = logp.gather(2, slot.clamp(min=0).unsqueeze(2)).squeeze(2)
    new = torch.where((mask > 0) & (slot >= 0), new, torch.zeros_like(new))
    ratio = torch.exp(new - old)
    a = adv.unsqueeze(1)
    surrogate = torch.min(ratio * a, torch.clamp(ratio, 1 - clip, 1 + clip) * a)
    if entropy:
        ent = -(logp.exp() * logp).sum(-1)
        surrogate = surrogate + entropy * ent
    per_episode = (surrogate * mask).sum(1) / mask.sum(1).clamp(min=1)
    return -per_episode.mean()


def train_step(policy, optimizer, groups, device, epochs=2, clip=0.2, entropy=0.0,
               step_hook=None):
    episodes = [ep for g in groups for ep in g.get("episodes", [])]
    for ep in episodes:
        check_episode(ep)
    if not episodes:
        return 0.0, 0
    loss_v = 0.0
    for _ in range(epochs):
        optimizer.zero_grad()
        loss = grpo_loss(policy, episodes, device, clip, entropy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        if step_hook:
            step_hook()
        loss_v = float(loss.detach().cpu())
    return loss_v, len(episodes)
