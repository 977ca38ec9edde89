"""The policy: a small pointer-generator language model trained from scratch (See et al., 2017).

A GRU reads the sequence (prompt, then the commands and tool outputs so far). At each position
the next token's distribution mixes two parts, weighted by a learned gate g:
  - generate: a softmax over the action vocabulary's keywords (echo, >, end of sequence);
    names (`names`: the files and words) are left to the copy path, so the policy can only
    write a name that its observations contain;
  - copy: one attention head over the action words of the context up to its last word that is
    not an action (query from the GRU state, key from the word's embedding); attending to a word
    proposes that word. The tokenizer ends every text it encodes (the task's prompt, a tool's
    output) with <eot>, which is not an action, so the copy source is exactly the observations
    so far and never the command being sampled (nor an earlier command with no output). The rule
    reads only the token sequence, so sampling and training see the same source.
The copy path lets one skill ("take the file named in the prompt") serve every task, including
word/file pairs never trained on. Only action words can be emitted: any other word has
probability 0, which keeps exploration tractable."""

import torch
import torch.nn as nn


class Policy(nn.Module):
    def __init__(self, vocab_size, action_ids, dim=64, hidden=128, capacity=4096, names=None):
        super().__init__()
        self.emb = nn.Embedding(capacity, dim)
        self.gru = nn.GRU(dim, hidden, batch_first=True)
        self.head = nn.Linear(hidden, len(action_ids))
        self.query = nn.Linear(hidden, dim)
        self.key = nn.Linear(dim, dim)
        self.gate = nn.Linear(hidden, 1)
        self.register_buffer("actions", torch.tensor(action_ids))
        slot = torch.full((capacity,), -1, dtype=torch.long)
        slot[self.actions] = torch.arange(len(action_ids))
        self.register_buffer("slot", slot)  # vocabulary id -> action index, -1 for other words
        # names (files, words): emitted only by copying them from the prompt, never generated
        gen_mask = torch.zeros(len(action_ids))
        if names:
            gen_mask[slot[torch.tensor(names)]] = float("-inf")
        self.register_buffer("gen_mask", gen_mask)

    def mix(self, h, keys, ctx, valid):
        """h [B, T, H] GRU states; keys [B, L, D], ctx [B, L] (ids), valid [B, T, L] (which
        context positions each state may see) -> log-probabilities over actions [B, T, A]."""
        gen = torch.softmax(self.head(h) + self.gen_mask, dim=-1)
        slot = self.slot[ctx]
        seen = valid & (slot >= 0).unsqueeze(1)  # only action words can be copied
        score = self.query(h) @ keys.transpose(1, 2) / keys.shape[-1] ** 0.5
        score = score.masked_fill(~seen, float("-inf"))
        att = torch.softmax(score, dim=-1).nan_to_num(0.0)  # no action word yet: all zero
        onehot = nn.functional.one_hot(slot.clamp(min=0), gen.shape[-1]).to(gen.dtype)
        copy = att @ (onehot * (slot >= 0).unsqueeze(-1))
        g = torch.sigmoid(self.gate(h)) * seen.any(-1, keepdim=True)
        return torch.log((1 - g) * gen + g * copy + 1e-12)

    def source(self, ids, lens=None):
        """ids [B, T] -> [B, T, T]: position s is in the copy source of position t when s is at
        or before the last non-action token at or before t (positions >= lens are padding)."""
        b, t = ids.shape
        pos = torch.arange(t, device=ids.device).expand(b, t)
        other = self.slot[ids] < 0
        if lens is not None:
            other = other & (pos < lens.unsqueeze(1))
        last = torch.where(other, pos, torch.full_like(pos, -1)).cummax(1).values  # [B, T]
        return pos.unsqueeze(1) <= last.unsqueeze(2)

    def forward(self, ids):
        """ids [B, T] -> log-probabilities of the next action [B, T, A] (causal)."""
        e = self.emb(ids)
        h, _ = self.gru(e)
        return self.mix(h, self.key(e), ids, self.source(ids))

    def next_logprobs(self, ids):
        """ids [B, T] -> [B, T-1]: the log-probability of token t+1 after tokens 0..t
        (-inf where token t+1 is not an action: the policy never emits it)."""
        logp = self(ids[:, :-1])
        slot = self.slot[ids[:, 1:]]
        lp = logp.gather(2, slot.clamp(min=0).unsqueeze(2)).squeeze(2)
        return torch.where(slot >= 0, lp, torch.full_like(lp, float("-inf")))

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
        e = self.emb(ids)
        packed = nn.utils.rnn.pack_padded_sequence(e, lens, batch_first=True,
                                                   enforce_sorted=False)
        _, h = self.gru(packed)  # h [1, B, H]: the state after each prompt's last token
        # the copy source stays the prompt's: sampled words are actions and never extend it
        ctx, keys = ids, self.key(e)
        valid = self.source(ids, lens.to(device))[torch.arange(n), lens.to(device) - 1]
        toks = [[] for _ in range(n)]
        lps = [[] for _ in range(n)]
        done = [False] * n
        steps = max(max_tokens) if max_tokens else 0
        for t in range(steps):
            logp = self.mix(h.transpose(0, 1), keys, ctx, valid.unsqueeze(1)).squeeze(1)
            logp = torch.log_softmax(logp / max(temperature, 1e-5), dim=-1)
            pick = torch.multinomial(logp.exp(), 1).squeeze(1)
            lp = logp.gather(1, pick.unsqueeze(1)).squeeze(1)
            nxt = self.actions[pick]
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
            en = self.emb(nxt.unsqueeze(1))
            _, h = self.gru(en, h)
        out = []
        for i in range(n):
            reason = "stop" if toks[i] and toks[i][-1] == eos else "length"
            out.append((toks[i], lps[i], reason))
        return out
