"""Word-level vocabulary of the toy task family: text is split on whitespace, one id per word.

The policy may only emit ACTION words (a tiny shell vocabulary: end of sequence, echo, >, four
files, four words); prompts and tool output use the
whole vocabulary, unknown words map to <unk>. With dynamic=True (the scripted policy used by the
tests) unknown words are added instead, so any command round-trips through /tokenize."""

import threading

PAD, EOS, UNK, EOT = "<pad>", "<eos>", "<unk>", "<eot>"
FILES = ["a.txt", "b.txt", "c.txt", "d.txt"]
WORDS = ["red", "green", "blue", "gold"]
ACTIONS = [EOS, "echo", ">"] + FILES + WORDS
# the toy prompts' other words; "task kN" names tasks in the tests' own task sets
PROMPT_WORDS = ["write", "to", "put", "in", "task"] + [f"k{i}" for i in range(32)]


class Vocab:
    def __init__(self, dynamic=False):
        self.words = [PAD, UNK, EOT] + ACTIONS + PROMPT_WORDS
        self.ids = {w: i for i, w in enumerate(self.words)}
        self.dynamic = dynamic
        self.lock = threading.Lock()
        self.eos = self.ids[EOS]
        self.action_ids = [self.ids[w] for w in ACTIONS]
        self.name_ids = [self.ids[w] for w in FILES + WORDS]

    def __len__(self):
        return len(self.words)

    def encode(self, text, eot=False):
        """Ids of the words of text; with eot, an observation (a prompt, a tool's output) that
        ends with <eot> (the policy's copy source ends at the last non-action word)."""
        out = []
        for w in text.split():
            i = self.ids.get(w)
            if i is None and self.dynamic:
                with self.lock:
                    i = self.ids.setdefault(w, len(self.words))
                    if i == len(self.words):
                        self.words.append(w)
            out.append(self.ids[UNK] if i is None else i)
        return out + [self.ids[EOT]] if eot and out else out

    def decode(self, ids):
        words = []
        for i in ids:
            if 0 <= i < len(self.words) and self.words[i] not in (PAD, EOS, EOT):
                words.append(self.words[i])
        return " ".join(words)
