"""The SDK's client side against a real daemon (tests/integration/test_python.sh `sdk_client`:
its Unix socket in SBX_HOST, its token-protected TCP port in SBX_TCP_HOST with a 1600-byte token
in SBX_TCP_TOKEN) and a local stand-in endpoint: a token libsbx refuses raises, a long token is
sent whole, an endpoint whose /v1/info is not an object is named, a lease's renewing thread
goes on past failures and stops when its token is refused, and wait_for_port keeps its
timeout against a server that never answers."""
import asyncio
import contextlib
import http.server
import os
import threading
import time

import pytest

import sandboxd
from sandboxd import (AsyncSandbox, Conflict, InfrastructureFailure, InvalidArgument, Lease,
                      NotFound, Sandbox, Unauthorized)

SMALL = dict(cpu=0.5, memory="256Mi")


class _Stub(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the server's ``body`` (200, JSON)."""
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = self.server.body
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def stub_endpoint(body: bytes):
    """An HTTP endpoint on 127.0.0.1 answering ``body``: yields its URL."""
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    srv.body = body
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()
        t.join()


def test_a_token_libsbx_refuses_raises():
    """A token file's trailing newline: raised, not replaced by $SBX_TOKEN or nothing."""
    with pytest.raises(InvalidArgument, match="token"):
        sandboxd.Client(token="abc\n")
    c = sandboxd.Client()
    c.token = "abc\x01def"  # the async engine's client handle takes it too
    with pytest.raises(InvalidArgument, match="token"):
        asyncio.run(AsyncSandbox.create(client=c, **SMALL))
    c.close()


def test_a_long_token_is_sent_whole():
    """1600 bytes of token (a JWT's size): every path sends it whole (was cut to 1001: 401)."""
    with sandboxd.Client(os.environ["SBX_TCP_HOST"], token=os.environ["SBX_TCP_TOKEN"]) as c:
        assert "max_sandboxes" in c.info()
        with Sandbox.create(client=c, **SMALL) as sb:
            assert sb.run("echo", "hi").stdout == "hi\n"

        async def on_a_loop():
            async with await AsyncSandbox.create(client=c, **SMALL) as a:
                assert (await a.run("echo", "ho")).stdout == "ho\n"
        asyncio.run(on_a_loop())


def test_an_endpoint_whose_info_is_not_an_object_is_named():
    with stub_endpoint(b"[]") as url:
        with sandboxd.Client(f"{os.environ['SBX_HOST']},{url}") as c:
            good, bad = c.info()
    assert "max_sandboxes" in good
    assert bad["endpoint"] == url
    assert "not an object" in bad["error"] and url in bad["error"]


def test_lease_keep_alive_goes_on_past_failures():
    """Two renewals fail (as while the daemon restarts): the thread tries again and the
    sandbox outlives the ttl; the lease deleted elsewhere (NotFound) ends the thread."""
    lease = Lease.create("4s")
    real, failed = lease.renew, []

    def flaky(h=None):
        if len(failed) < 2:
            failed.append(time.monotonic())
            raise InfrastructureFailure("cannot reach sandboxd (injected)", "connect_failed")
        real(h)
    lease.renew = flaky
    lease.keep_alive(0.5)
    sb = Sandbox.create(lease=lease, **SMALL)
    time.sleep(6)
    assert len(failed) == 2 and lease.renewing
    assert isinstance(lease.error, InfrastructureFailure)
    assert sb.inspect().state == "running"
    Lease(lease.id).delete()  # elsewhere: its sandboxes end, the next renewal finds it gone
    deadline = time.monotonic() + 10
    while lease.renewing and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not lease.renewing and isinstance(lease.error, NotFound)
    assert sb.inspect().state == "ended"
    lease.stop()
    sb.close()


def test_lease_keep_alive_stops_when_the_token_is_refused():
    """A renewing client with a wrong token (401): trying again cannot help, so the thread
    ends with the error kept, as for NotFound (it renewed forever)."""
    host, token = os.environ["SBX_TCP_HOST"], os.environ["SBX_TCP_TOKEN"]
    with sandboxd.Client(host, token=token) as good, \
            sandboxd.Client(host, token="wrong-token") as bad:
        lease = Lease.create("60s", client=good)
        renewer = Lease(lease.id, client=bad)
        try:
            renewer.keep_alive(0.2)
            deadline = time.monotonic() + 10
            while renewer.renewing and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not renewer.renewing, f"still renewing after {renewer.error!r}"
            assert isinstance(renewer.error, Unauthorized), repr(renewer.error)
        finally:
            renewer.stop()
            lease.delete()


SILENT = ("import socket\n"
          "s = socket.socket()\n"
          "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          "s.bind(('127.0.0.1', 8000))\n"
          "s.listen(16)\n"
          "held = []\n"
          "while True:\n"
          "    held.append(s.accept())\n")
CONNECTS = ("import socket, sys, time\n"
            "for _ in range(100):\n"
            "    try:\n"
            "        socket.create_connection(('127.0.0.1', 8000)); sys.exit(0)\n"
            "    except OSError:\n"
            "        time.sleep(0.1)\n"
            "sys.exit(1)\n")


def test_wait_for_port_keeps_its_timeout():
    """A server that accepts and never answers (the proxy would wait 30 s for it)."""
    with Sandbox.create(ports=[8000], entrypoint=["python3", "-c", SILENT], **SMALL) as sb:
        assert sb.run("python3", "-c", CONNECTS).exit_code == 0
        t0 = time.monotonic()
        with pytest.raises(Conflict) as e:
            sb.wait_for_port(8000, timeout=1)
        took = time.monotonic() - t0
        assert e.value.code == "port_wait_timeout" and "within 1.0 s" in e.value.message
        assert took < 5, f"wait_for_port(timeout=1) took {took:.1f} s"
        assert sb.run("true").exit_code == 0  # the handle's next request is not limited
        # the same through TCP (libcurl)
        with sandboxd.Client(os.environ["SBX_TCP_HOST"], token=os.environ["SBX_TCP_TOKEN"]) as c:
            tcp = Sandbox.open(sb.id, client=c)
            t0 = time.monotonic()
            with pytest.raises(Conflict, match="port_wait_timeout"):
                tcp.wait_for_port(8000, timeout=1)
            assert time.monotonic() - t0 < 5
            assert tcp.run("true").exit_code == 0
            tcp.close()
