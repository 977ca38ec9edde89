#!/usr/bin/env python3
# A stand-in for sandboxd on 127.0.0.1 that creates a sandbox but cannot show it: POST
# /v1/sandboxes answers 201 with an id, GET of that sandbox 500, DELETE of it 204, anything else
# 404. For tests/integration/test_cli.sh `create_json_inspect_fails` (what `sbx create --json`
# does with a sandbox it cannot read back). Usage: fake_sandboxd.py PORTFILE LOGFILE; the port
# it listens on goes to PORTFILE, "METHOD PATH" of each request to LOGFILE.
import http.server
import json
import os
import sys

ID = "sb-0123456789abcdef0123456789abcdef"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def answer(self, status, obj=None):
        body = json.dumps(obj).encode() if obj is not None else b""
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        with open(sys.argv[2], "a") as f:
            f.write(f"{self.command} {self.path}\n")
        mine = self.path == f"/v1/sandboxes/{ID}"
        if self.command == "POST" and self.path == "/v1/sandboxes":
            self.answer(201, {"id": ID, "state": "running"})
        elif self.command == "GET" and mine:
            self.answer(500, {"code": "internal", "message": "inspect broke (fake_sandboxd)"})
        elif self.command == "DELETE" and mine:
            self.answer(204)
        else:
            self.answer(404, {"code": "not_found", "message": "not here"})

    do_GET = do_POST = do_DELETE = handle_one

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(sys.argv[1] + ".new", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(sys.argv[1] + ".new", sys.argv[1])
srv.serve_forever()
