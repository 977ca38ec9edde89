"""The policy: a small GRU language model trained from scratch. Its output head is restricted
to the action vocabulary (logits of other words are -inf), which keeps exploration tractable."""

import torch
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self, vocab_size, action_ids, dim=64, hidden=128, capacity=4096):
        super().__init__()
        self.emb = nn.Embedding(capacity, dim)
        self.gru = nn.GRU(dim, hidden, batch_first=True)
        self.head = nn.Linear(hidden, capacity)
        mask = torch.full((capacity,), float("-inf"))
        mask[torch.tensor(action_ids)] = 0.0
        self.register_buffer("action_mask", mask)

    def logits(self, h):
        return self.head(h) + self.action_mask

    def forward(self, ids):
        """ids [B, T] -> log-probabilities of the next token [B, T, V]."""
        out, _ = self.gru(self.emb(ids))
        return torch.log_softmax(self.logits(out), dim=-1)

    @torch.no_grad()
    def generate(self, prompts, max_tokens, temperature, eos, device):
        """Sample continuations for a batch of prompts (lists of ids), one forward per token.
        Returns per prompt (token ids, their log-probabilities, finish_reason)."""
        n = len(prompts)
        lens = torch.tensor([max(1, len(p)) for p in prompts])
        width = int(lens.max())
        ids = torch.zeros((n, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            if p:
                ids[i, : len(p)] = torch.tensor(p)
        ids = ids.to(device)
        packed = nn.utils.rnn.pack_padded_sequence(
            self.emb(ids), lens, batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)  # h [1, B, H]
        toks = [[] for _ in range(n)]
        lps = [[] for _ in range(n)]
        done = [False] * n
        steps = max(max_tokens) if max_tokens else 0
        for t in range(steps):
            logits = self.logits(h[0]) / max(temperature, 1e-5)
            logp = torch.log_softmax(logits, dim=-1)
            nxt = torch.multinomial(logp.exp(), 1).squeeze(1)
            lp = logp.gather(1, nxt.unsqueeze(1)).squeeze(1)
            nxt_l, lp_l = nxt.tolist(), lp.tolist()
            for i in range(n):
                if done[i] or t >= max_tokens[i]:
                    done[i] = True
                    continue
                toks[i].append(nxt_l[i])
                lps[i].append(lp_l[i])
                if nxt_l[i] == eos:
                    done[i] = True
            if all(done):
                break
            _, h = self.gru(self.emb(nxt.unsqueeze(1)), h)
        out = []
        for i in range(n):
            reason = "stop" if toks[i] and toks[i][-1] == eos else "length"
            out.append((toks[i], lps[i], reason))
        return out
