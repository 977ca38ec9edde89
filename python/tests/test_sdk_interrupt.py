"""Ctrl-C during a synchronous Sandbox.run() (tests/integration/test_python.sh `sdk_interrupt`):
a child Python waits in run("... sleep 1000") and gets SIGINT. KeyboardInterrupt comes at
once (before, Python raised it only when libsbx's call returned: after the command's end, 1000
s later); the command goes on in the sandbox, as for any client that went away, until the
sandbox ends: with a ``with`` block, at once. The Sandbox object works after it. And run()
leaves the interpreter's wakeup fd as it found it (none, or the program's own). test_python.sh
runs it on the Unix socket and on a TCP port ($SBX_HOST)."""
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from sandboxd import NotFound, Sandbox

# The child: Python's own SIGINT handler (a test runner may have left SIGINT ignored, and an
# interpreter started with it ignored keeps it so), a sandbox, its id on stdout, then a run()
# that writes /tmp/started and sleeps; at the KeyboardInterrupt, "interrupted MONOTONIC".
CHILD = r"""
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from sandboxd import Sandbox
sb = Sandbox.create(cpu=0.25, memory="64Mi")
print(sb.id, flush=True)

def wait_in_run():
    try:
        sb.run("touch /tmp/started; exec sleep 1000", shell=True)
    except KeyboardInterrupt:
        print("interrupted", time.monotonic(), flush=True)
        raise
    print("run returned", flush=True)

if sys.argv[1] == "with":
    with sb:
        wait_in_run()
else:
    try:
        wait_in_run()
    except KeyboardInterrupt:
        print(sb.run("echo", "again").stdout.strip(), flush=True)
    sb.close()
"""


def interrupt_in_run(mode):
    """Start the child, wait until its command runs, SIGINT it. Returns (sandbox id, seconds
    from the SIGINT to the KeyboardInterrupt, the child's stdout lines after the id, its exit
    status)."""
    p = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=os.environ)
    sb = None
    try:
        sid = p.stdout.readline().strip()
        assert sid.startswith("sb-"), f"the child made no sandbox: {p.stderr.read()[-500:]}"
        sb = Sandbox.open(sid)
        deadline = time.monotonic() + 30
        while True:
            try:
                sb.read_file("/tmp/started")
                break
            except NotFound:
                assert time.monotonic() < deadline, "the child's command never started"
                time.sleep(0.05)
        time.sleep(0.3)  # the child waits in libsbx for the answer now
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            pytest.fail(f"no KeyboardInterrupt within 10 s of the SIGINT: the child still waits "
                        f"in run() (stdout {out!r}, stderr {err[-300:]!r})")
        lines = out.split("\n")
        assert lines[0].startswith("interrupted "), f"stdout {out!r}, stderr {err[-500:]!r}"
        return sb, float(lines[0].split()[1]) - sent, lines[1:], p.returncode
    except BaseException:
        if sb is not None:
            sb.terminate()
        raise
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def sleeping(sb):
    """Whether `sleep 1000` runs in the sandbox."""
    r = sb.run("for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' <$f; echo; done", shell=True)
    return "sleep 1000" in r.stdout


def test_ctrl_c_in_run_in_a_with_block_interrupts_and_ends_the_sandbox():
    sb, took, rest, status = interrupt_in_run("with")
    assert took < 1.0, f"KeyboardInterrupt {took:.3f} s after the SIGINT"
    assert status == -signal.SIGINT, "the KeyboardInterrupt went on out of the child"
    assert sb.inspect().state == "ended", "the with block did not end the sandbox"


def test_ctrl_c_in_run_interrupts_the_command_goes_on_and_the_sandbox_still_works():
    sb, took, rest, status = interrupt_in_run("bare")
    try:
        assert took < 1.0, f"KeyboardInterrupt {took:.3f} s after the SIGINT"
        assert rest[:1] == ["again"], f"the next run() after it: {rest!r}"
        assert status == 0
        assert sleeping(sb), "the interrupted run()'s command no longer runs"
    finally:
        sb.terminate()


def test_run_leaves_the_wakeup_fd_as_it_found_it():
    """run() sets the wakeup fd for its call only (none before: none after), and leaves a
    program's own (an event loop's) alone."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    r, w = socket.socketpair()
    w.setblocking(False)
    try:
        with Sandbox.create(cpu=0.25, memory="64Mi") as sb:
            assert sb.run("echo", "x").stdout == "x\n"
            assert signal.set_wakeup_fd(-1) == -1, "run() left a wakeup fd set"
            signal.set_wakeup_fd(w.fileno())
            try:
                assert sb.run("echo", "y").stdout == "y\n"
            finally:
                assert signal.set_wakeup_fd(-1) == w.fileno(), "run() replaced the program's"
    finally:
        signal.signal(signal.SIGINT, old)
        r.close()
        w.close()


def test_sigint_between_the_wakeup_fd_and_the_call_is_not_lost(monkeypatch):
    """A SIGINT whose byte reaches the pair after run() set the wakeup fd but before libsbx's
    call began ends that call at once, before the command is sent (before, libsbx read the byte
    as an old one and the KeyboardInterrupt came only with the command's end). The byte is put
    there as Python's C handler writes it, from inside run()'s set_wakeup_fd."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    real = signal.set_wakeup_fd
    wfd = []

    def set_and_signal(fd, **kw):
        prev = real(fd, **kw)
        if fd >= 0 and wfd == [fd]:
            os.write(fd, bytes([signal.SIGINT]))
        return prev

    try:
        with Sandbox.create(cpu=0.25, memory="64Mi") as sb:
            assert sb.run("echo", "x").stdout == "x\n"  # (the client and its pair exist now)
            from sandboxd import _lib
            wfd.append(_lib.interrupt_fd())
            assert wfd[0] >= 0, "run() would watch no wakeup fd here"
            monkeypatch.setattr(signal, "set_wakeup_fd", set_and_signal)
            t0 = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                r = sb.run("touch /tmp/early; sleep 3", shell=True)
                pytest.fail(f"run() returned {r.exit_code} after {time.monotonic() - t0:.1f} s:"
                            f" the SIGINT before its call was lost")
            assert time.monotonic() - t0 < 1.0
            monkeypatch.setattr(signal, "set_wakeup_fd", real)
            assert sb.run("test -e /tmp/early || echo absent", shell=True).stdout == \
                "absent\n", "the interrupted call's command ran"
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_byte_left_in_the_pair_before_run_does_not_end_it():
    """What reached the pair outside run()'s call (a signal as an earlier call ended) is not
    for the next call: run() empties the pair before it sets the wakeup fd."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with Sandbox.create(cpu=0.25, memory="64Mi") as sb:
            assert sb.run("echo", "x").stdout == "x\n"
            from sandboxd import _lib
            wfd = _lib.interrupt_fd()
            assert wfd >= 0, "run() would watch no wakeup fd here"
            os.write(wfd, bytes([signal.SIGINT]) * 3)
            try:
                out = sb.run("sleep 0.2; echo done", shell=True).stdout
            except KeyboardInterrupt:
                pytest.fail("run() was interrupted by bytes left in the pair before it")
            assert out == "done\n"
    finally:
        signal.signal(signal.SIGINT, old)


def test_a_sigint_as_run_ends_ends_no_later_call(monkeypatch):
    """A SIGINT that lands as run()'s call ends, before run() unsets the wakeup fd, leaves its
    byte in the pair (its KeyboardInterrupt is Python's handler's): no later call of the client
    ends for it, one of another method (write_file here, the with block's terminate) neither
    (before, only run() emptied the pair: such a call failed "interrupted before sending", and
    a with block's end left its sandbox running). The byte is put there as Python's C handler
    writes it, from inside run()'s unset."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    real = signal.set_wakeup_fd
    wfd = []

    def sigint_then_unset(fd, **kw):
        if wfd and fd != wfd[0]:
            os.write(wfd[0], bytes([signal.SIGINT]))
        return real(fd, **kw)

    try:
        with Sandbox.create(cpu=0.25, memory="64Mi") as sb:
            assert sb.run("echo", "x").stdout == "x\n"
            from sandboxd import _lib
            wfd.append(_lib.interrupt_fd())
            assert wfd[0] >= 0, "run() would watch no wakeup fd here"
            monkeypatch.setattr(signal, "set_wakeup_fd", sigint_then_unset)
            assert sb.run("echo", "y").stdout == "y\n"
            monkeypatch.setattr(signal, "set_wakeup_fd", real)
            sb.write_file("/tmp/after", "z")
            assert sb.read_file("/tmp/after") == b"z"
    finally:
        signal.signal(signal.SIGINT, old)
