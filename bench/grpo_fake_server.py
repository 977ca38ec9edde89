#!/usr/bin/python3
"""A stand-in generation + training server for bench/grpo.sh (no torch, no model): every
completion takes a fixed --delay-ms (a generation server with room for every request in its
batch) and answers one token that decodes to --command, or with --answers FILE (a JSON object
from prompt substring to command) the command of the first substring found in the prompt: a
scripted policy for the e2e tests. Tokens are strings interned on the fly. /v1/train_step only
bumps the policy version. With --hold-file F a completion waits until F exists (a test holds
every episode at its first generation, at a point it knows); GET /v1/fake_stats says how many
completions are held and answered. For the runner's checks of what the trainer answers:
--train-status N answers /v1/train_step with HTTP N (and an error), --malformed KIND answers
one kind of request wrongly (MALFORMED lists the kinds). Usage:
  bench/grpo_fake_server.py --port-file F [--delay-ms 50] [--command 'echo red > b.txt']
                            [--answers FILE] [--hold-file F] [--train-status N]
                            [--malformed KIND]"""

import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
strings, ids = [], {}
state = {"version": 0, "completions": 0, "held": 0}

# --malformed KIND: the answer's fields that replace (or, as None, drop) the right answer's
MALFORMED = {
    "train-empty": ("/v1/train_step", {"policy_version": None, "loss": None, "episodes": None}),
    "detok-no-prompt": ("/detokenize", {"prompt": None}),
    "tokenize-negative": ("/tokenize", {"tokens": [-1]}),
    "tokenize-float": ("/tokenize", {"tokens": [1.5]}),
    "tokenize-huge": ("/tokenize", {"tokens": [2**31]}),
    "token-negative": ("/v1/completions", {"token_ids": [-1]}),
    "token-float": ("/v1/completions", {"token_ids": [1.5]}),
    "token-huge": ("/v1/completions", {"token_ids": [2**31]}),
    "logprob-positive": ("/v1/completions", {"token_logprobs": [0.5]}),
    "logprob-string": ("/v1/completions", {"token_logprobs": ["x"]}),
    "too-many-tokens": ("/v1/completions", {"token_ids": [0] * 5000,
                                            "token_logprobs": [-0.1] * 5000}),
}


def malform(args, path, answer):
    kind = MALFORMED.get(args.malformed)
    if not kind or kind[0] != path:
        return answer
    for k, v in kind[1].items():
        o = answer
        if path == "/v1/completions":
            o = answer["choices"][0]
            o = o["logprobs"] if k == "token_logprobs" else o
        if v is None:
            o.pop(k, None)
        else:
            o[k] = v
    return answer


def intern(s):
    with lock:
        if s not in ids:
            ids[s] = len(strings)
            strings.append(s)
        return ids[s]


def make_handler(args):
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def reply(self, obj, status=200):
            data = json.dumps(malform(args, self.path, obj)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/v1/fake_stats":
                with lock:
                    return self.reply({"held": state["held"], "completions": state["completions"]})
            self.reply({"policy_version": state["version"]})

        def hold(self):
            if not args.hold_file or os.path.exists(args.hold_file):
                return
            with lock:
                state["held"] += 1
            while not os.path.exists(args.hold_file):
                time.sleep(0.02)
            with lock:
                state["held"] -= 1

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            if self.path == "/v1/completions":
                self.hold()
                time.sleep(args.delay_ms / 1000.0)
                with lock:
                    state["completions"] += 1
                text = " ".join(strings[t] for t in body.get("prompt", []))
                cmd = next((c for k, c in args.answers.items() if k in text), args.command)
                tok = intern(cmd)
                return self.reply({"choices": [{"token_ids": [tok], "finish_reason": "stop",
                                                "logprobs": {"token_logprobs": [-0.1]}}]})
            if self.path == "/tokenize":
                text = " ".join(m.get("content", "") for m in body["messages"]) \
                    if "messages" in body else str(body.get("prompt", ""))  # vLLM's chat form
                toks = [intern(w) for w in text.split()] or [intern("")]
                return self.reply({"tokens": toks, "count": len(toks), "max_model_len": 4096})
            if self.path == "/detokenize":
                return self.reply({"prompt": " ".join(strings[t] for t in body.get("tokens", []))})
            if self.path == "/v1/train_step":
                if args.train_status != 200:
                    return self.reply({"error": "refused by --train-status"}, args.train_status)
                state["version"] += 1
                return self.reply({"policy_version": state["version"], "loss": 0.0, "episodes": 0})
            self.send_error(404)

    return H


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--delay-ms", type=float, default=50.0)
    ap.add_argument("--command", default="echo red > b.txt")
    ap.add_argument("--answers", help="JSON object: prompt substring -> command")
    ap.add_argument("--hold-file", help="completions wait until this file exists")
    ap.add_argument("--train-status", type=int, default=200,
                    help="the HTTP status of every /v1/train_step answer")
    ap.add_argument("--malformed", choices=sorted(MALFORMED),
                    help="answer one kind of request without a required field, or out of range")
    args = ap.parse_args()
    args.answers = json.load(open(args.answers)) if args.answers else {}
    ThreadingHTTPServer.request_queue_size = 1024
    srv = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(args))
    srv.daemon_threads = True
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(args.port_file + ".tmp", args.port_file)
    srv.serve_forever()


if __name__ == "__main__":
    main()
