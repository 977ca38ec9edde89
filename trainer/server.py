#!/usr/bin/python3
"""The reference GRPO trainer: one process serving both planes over HTTP.

Generation (a subset of vLLM's OpenAI-compatible API, so a vLLM server can stand in):
  POST /v1/completions  {"prompt":[ids],"max_tokens":n,"temperature":t,"logprobs":0,
                         "return_token_ids":true} -> choices[0].token_ids,
                         choices[0].logprobs.token_logprobs, finish_reason
  POST /tokenize        {"prompt":"text"} -> {"tokens":[ids],"count":n}; or vLLM's chat form
                         {"messages":[{"role","content"}],"add_generation_prompt":true}
                         rendered by chat_text (the toy model's chat template)
  POST /detokenize      {"tokens":[ids]}  -> {"prompt":"text"}
Training:
  GET  /v1/state        -> {"policy_version":v, ...}
  POST /v1/train_step   {"groups":[{"episodes":[{prompt_ids, completion_ids, loss_mask,
                         sampling_logprobs, reward, advantage, policy_version}]}]}
                         -> {"policy_version":v+1,"loss":x,"episodes":n}
Concurrent completion requests are batched: requests arriving within --batch-ms are sampled by
one forward pass per token. Usage: trainer/server.py --port 0 --port-file F [--device cpu|cuda|tpu]
"""

import argparse
import json
import os
import queue
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import grpo  # noqa: E402
import toy  # noqa: E402
from model import Policy  # noqa: E402
from vocab import Vocab  # noqa: E402


def pick_device(name):
    if name == "cpu":
        return torch.device("cpu"), None
    if name == "cuda":
        if not torch.cuda.is_available():
            sys.exit("trainer: --device cuda but CUDA is not available")
        return torch.device("cuda"), None
    if name == "tpu":
        try:
            import torch_xla.core.xla_model as xm
        except ImportError:
            sys.exit("trainer: --device tpu needs torch_xla (TorchTPU), which is not installed")
        return xm.xla_device(), xm.mark_step
    sys.exit(f"trainer: unknown device {name}")


class Scripted:
    """A policy that replays fixed commands (tests): turn k answers line k of the script."""

    def __init__(self, path, vocab):
        with open(path) as f:
            self.lines = [ln.rstrip("\n") for ln in f if ln.strip()]
        self.vocab = vocab

    def generate(self, prompts, max_tokens, temperature, eos, device):
        out = []
        for p in prompts:
            turn = sum(1 for t in p if t == eos)
            toks = self.vocab.encode(self.lines[turn]) if turn < len(self.lines) else []
            toks = toks + [eos]
            out.append((toks, [0.0] * len(toks), "stop"))
        return out


class Trainer:
    def __init__(self, args):
        torch.manual_seed(args.seed)
        torch.set_num_threads(args.threads)
        self.device, self.mark_step = pick_device(args.device)
        self.vocab = Vocab(dynamic=bool(args.scripted))
        self.policy = Policy(len(self.vocab), self.vocab.action_ids,
                             names=self.vocab.name_ids).to(self.device)
        self.opt = torch.optim.Adam(self.policy.parameters(), lr=args.lr)
        self.scripted = Scripted(args.scripted, self.vocab) if args.scripted else None
        self.epochs = args.epochs
        self.entropy = args.entropy
        self.version = 0
        self.lock = threading.Lock()
        self.queue = queue.Queue()
        self.batch_s = args.batch_ms / 1000.0
        self.max_batch = args.max_batch
        # generation_seconds / training_seconds: time the device spent generating and training
        # (GET /v1/state), so a run can tell how long the accelerator waited on the sandboxes
        self.stats = {"batches": 0, "completions": 0, "largest_batch": 0,
                      "generation_seconds": 0.0, "training_seconds": 0.0}
        threading.Thread(target=self.batcher, daemon=True).start()

    def batcher(self):
        while True:
            items = [self.queue.get()]
            deadline = time.monotonic() + self.batch_s
            while len(items) < self.max_batch:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    items.append(self.queue.get(timeout=left))
                except queue.Empty:
                    break
            try:
                with self.lock:
                    t0 = time.monotonic()
                    gen = self.scripted or self.policy
                    res = gen.generate([it["prompt"] for it in items],
                                       [it["max_tokens"] for it in items],
                                       items[0]["temperature"], self.vocab.eos, self.device)
                    self.stats["generation_seconds"] += time.monotonic() - t0
                self.stats["batches"] += 1
                self.stats["completions"] += len(items)
                self.stats["largest_batch"] = max(self.stats["largest_batch"], len(items))
                for it, r in zip(items, res):
                    it["result"] = r
            except Exception as e:  # deliver the failure to every waiting request
                for it in items:
                    it["error"] = str(e)
            for it in items:
                it["done"].set()

    def complete(self, body):
        prompt = body.get("prompt")
        if not isinstance(prompt, list) or not prompt or \
                not all(isinstance(t, int) and 0 <= t < len(self.vocab.words) + 4096
                        for t in prompt):
            raise ValueError("\"prompt\" must be a non-empty list of token ids")
        item = {"prompt": prompt, "max_tokens": int(body.get("max_tokens", 16)),
                "temperature": float(body.get("temperature", 1.0)), "done": threading.Event()}
        self.queue.put(item)
        item["done"].wait()
        if "error" in item:
            raise RuntimeError(item["error"])
        toks, lps, reason = item["result"]
        return {"id": f"cmpl-{self.version}", "object": "text_completion",
                "model": "toy-gru", "choices": [{
                    "index": 0, "text": self.vocab.decode(toks), "token_ids": toks,
                    "logprobs": {"token_logprobs": lps,
                                 "tokens": [self.vocab.words[t] for t in toks]},
                    "finish_reason": reason}],
                "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(toks)}}

    def train(self, body):
        groups = body.get("groups")
        if not isinstance(groups, list):
            raise ValueError("\"groups\" must be a list")
        with self.lock:
            t0 = time.monotonic()
            if self.scripted:
                loss, n = 0.0, sum(len(g.get("episodes", [])) for g in groups)
            else:
                loss, n = grpo.train_step(self.policy, self.opt, groups, self.device,
                                          epochs=self.epochs, entropy=self.entropy,
                                          step_hook=self.mark_step)
            self.version += 1
            self.stats["training_seconds"] += time.monotonic() - t0
            rewards = [ep.get("reward", 0) for g in groups for ep in g.get("episodes", [])]
            mean = sum(rewards) / len(rewards) if rewards else 0
            print(f"trainer: step {body.get('step')} -> policy {self.version}: {n} episodes, "
                  f"loss {loss:.4f}, trained reward mean {mean:.3f}", file=sys.stderr, flush=True)
            return {"policy_version": self.version, "loss": loss, "episodes": n}


def make_handler(tr):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def reply(self, code, obj):
            data = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path in ("/v1/state", "/health"):
                return self.reply(200, {"policy_version": tr.version, "model": "toy-gru",
                                        "vocab_size": len(tr.vocab), "device": str(tr.device),
                                        **tr.stats})
            self.reply(404, {"message": f"no route {self.path}", "code": "not_found"})

        def do_POST(self):
            try:
                n = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(n) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("the body must be a JSON object")
                if self.path == "/v1/completions":
                    return self.reply(200, tr.complete(body))
                if self.path == "/tokenize":
                    text = chat_text(body["messages"], body.get("add_generation_prompt", True)) \
                        if "messages" in body else str(body.get("prompt", ""))
                    toks = tr.vocab.encode(text, eot=True)
                    return self.reply(200, {"tokens": toks, "count": len(toks),
                                            "max_model_len": 4096})
                if self.path == "/detokenize":
                    return self.reply(200, {"prompt": tr.vocab.decode(body.get("tokens", []))})
                if self.path == "/v1/train_step":
                    return self.reply(200, tr.train(body))
                self.reply(404, {"message": f"no route {self.path}", "code": "not_found"})
            except (ValueError, TypeError, KeyError) as e:
                self.reply(400, {"message": str(e), "code": "invalid_argument"})
            except Exception as e:  # noqa: BLE001
                self.reply(500, {"message": str(e), "code": "internal"})

    return Handler


def chat_text(messages, add_generation_prompt=True):
    """The toy model's chat template: a "role: content" line per message, then "assistant:"
    when a reply is asked for (vLLM's /tokenize applies the served model's own template)."""
    if not isinstance(messages, list) or not all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        raise ValueError("\"messages\" must be a list of {\"role\", \"content\"} objects")
    lines = [f"{m.get('role', 'user')}: {m['content']}" for m in messages]
    return "\n".join(lines + (["assistant:"] if add_generation_prompt else []))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--port-file", help="write the bound port here (with --port 0)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "tpu"])
    ap.add_argument("--lr", type=float, default=toy.LR)
    ap.add_argument("--epochs", type=int, default=toy.EPOCHS)
    ap.add_argument("--entropy", type=float, default=toy.ENTROPY,
                    help="entropy bonus coefficient of the loss")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch-ms", type=float, default=5.0)
    ap.add_argument("--max-batch", type=int, default=256)
    ap.add_argument("--scripted", help="replay the commands of this file instead of sampling")
    args = ap.parse_args()
    tr = Trainer(args)
    # The runner opens one connection per episode in flight: keep a deep listen backlog (the
    # default of 5 drops SYNs and stalls clients for seconds).
    ThreadingHTTPServer.request_queue_size = 1024
    srv = ThreadingHTTPServer((args.host, args.port), make_handler(tr))
    srv.daemon_threads = True
    port = srv.server_address[1]
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        os.rename(args.port_file + ".tmp", args.port_file)
    print(f"trainer: serving on http://{args.host}:{port} ({tr.device})", file=sys.stderr,
          flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
