#!/usr/bin/env python3
"""An OpenEnv-style environment server (stdlib only) for the tests: POST /reset -> observation,
POST /step {"action": {...}} -> {"observation", "reward", "done"}, GET /state.

The toy task: say the secret word. Each step's action is {"message": TEXT}; the observation
echoes it with the turn number and a hint; reward 1.0 and done when TEXT contains the word
(ENV_WORD, default "red"), else 0.0, done after ENV_MAX_TURNS (3) turns.

openenv_server.py [PORT [PAD]]   (default 8000; listens on 127.0.0.1; PAD: each step's
observation text ends with PAD characters "\u20ac", 3 bytes each in UTF-8: a long observation)
"""
import http.server
import json
import os
import sys
import uuid

WORD = os.environ.get("ENV_WORD", "red")
MAX_TURNS = int(os.environ.get("ENV_MAX_TURNS", "3"))
PAD = ""
STATE = {"episode_id": None, "step_count": 0, "actions": [], "solved": False, "done": False}


def reset():
    STATE.update(episode_id=uuid.uuid4().hex, step_count=0, actions=[], solved=False, done=False)
    return {"observation": {"text": "say the secret word (a colour)", "turn": 0},
            "reward": None, "done": False}


def step(action):
    if STATE["episode_id"] is None or STATE["done"]:
        raise ValueError("call /reset first" if STATE["episode_id"] is None else "episode is done")
    msg = action.get("message") if isinstance(action, dict) else None
    if not isinstance(msg, str):
        raise ValueError("action.message: must be a string")
    STATE["step_count"] += 1
    STATE["actions"].append(msg)
    solved = WORD in msg
    STATE["solved"] = STATE["solved"] or solved
    STATE["done"] = solved or STATE["step_count"] >= MAX_TURNS
    hint = "yes" if solved else "no: it is the colour of a stop sign"
    return {"observation": {"text": f"turn {STATE['step_count']}: you said {msg!r}; {hint}{PAD}",
                            "turn": STATE["step_count"]},
            "reward": 1.0 if solved else 0.0, "done": STATE["done"]}


class Handler(http.server.BaseHTTPRequestHandler):
    def answer(self, code, obj):
        b = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        if self.path in ("/state", "/health"):
            return self.answer(200, STATE if self.path == "/state" else {"status": "healthy"})
        self.answer(404, {"error": "no such endpoint"})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(n) or b"{}")
            if self.path == "/reset":
                return self.answer(200, reset())
            if self.path == "/step":
                return self.answer(200, step(body.get("action")))
        except (ValueError, AttributeError) as e:
            return self.answer(400, {"error": str(e)})
        self.answer(404, {"error": "no such endpoint"})

    def log_message(self, *a):
        pass


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
    PAD = " " + "\u20ac" * int(sys.argv[2]) if len(sys.argv) > 2 else ""
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
