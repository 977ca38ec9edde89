"""sbx_grade: helpers for GRPO graders (docs/GRPO.md "Grader kinds"). Standard library only.

The runner writes this file next to the hidden tests (/grader/sbx_grade.py) in every grading
sandbox; a grader started there as the grader user (uid 1001) imports it with `import sbx_grade`.
Every piece of the agent's code runs through `sbx-as-agent`: as the agent user (uid 1000), in a
process tree that is not below the grader, with its own timeout and output bound. Nothing here
imports, execs or reads code of the agent's into the grader's own process, and the expected values
never leave the grader: the agent's process gets the inputs only and prints what it computed;
the comparison happens here.

    import sbx_grade
    ok = sbx_grade.call_functions("solution", "fizzbuzz", [([3], ["1", "2", "Fizz"])])
    sbx_grade.verdict(ok)                     # exit 0 (pass) or 1 (fail)

    ok = sbx_grade.compare_program(["python3", "main.py"], [("2 3\\n", "5\\n")])

Exit statuses a grader should use: 0 pass, 1 fail (anything the agent did wrong, including a
crash, a timeout, too much output or a wrong type), 125 when the platform failed (sbx-as-agent
could not run the program): the runner counts 125 as an infrastructure failure, never as the
agent's. `main(fn)` maps PlatformError to 125 for you."""

import json
import math
import os
import secrets
import stat
import subprocess
import sys
import tempfile

AGENT_HELPER = os.environ.get("SBX_AS_AGENT", "sbx-as-agent")
PLATFORM_EXIT = 125
DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_OUTPUT = 1 << 20


class PlatformError(Exception):
    """sbx-as-agent itself failed: not the agent's fault (exit 125)."""


class AgentRun:
    """How one run of the agent's program ended (sbx-as-agent's --result record)."""

    def __init__(self, record, stdout, stderr):
        self.exit_code = record.get("exit_code")
        self.signal = record.get("signal")
        self.reason = record.get("reason", "")
        self.truncated = bool(record.get("truncated"))
        self.stdout = stdout  # bytes, at most max_output
        self.stderr = stderr

    @property
    def ok(self):
        """Exited by itself with status 0 and wrote no more than the bound."""
        return self.reason == "exited" and self.exit_code == 0 and not self.truncated

    def __repr__(self):
        return (f"AgentRun(reason={self.reason!r}, exit_code={self.exit_code!r}, "
                f"signal={self.signal!r}, truncated={self.truncated!r})")


def _private_dir():
    """A directory only the grader can read (its HOME is 0700), never /tmp or /workspace."""
    base = os.environ.get("HOME") or "/grader"
    return tempfile.mkdtemp(prefix="sbx-grade.", dir=base)


def _disk_full(path):
    """The sandbox's disk (shared by the grader's scratch space and the agent's programs) has
    no room left: the agent's programs can fill it, so that is their failure, not the
    platform's."""
    try:
        st = os.statvfs(path)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < (256 << 10) or st.f_favail == 0


def _no_room(what):
    return AgentRun({"reason": "no_space", "exit_code": None}, b"", what.encode())


def run_agent(argv, stdin=b"", timeout=DEFAULT_TIMEOUT, max_output=DEFAULT_MAX_OUTPUT,
              cwd="/workspace"):
    """Run argv as the agent user through sbx-as-agent; returns an AgentRun. stdin (bytes or
    str) reaches the program on its stdin only, from a file the agent cannot open by name.
    Raises PlatformError when the helper itself failed. A full disk (the grader's scratch files
    live on the sandbox's disk, which the agent's programs share) is a failed run."""
    if isinstance(stdin, str):
        stdin = stdin.encode()
    try:
        d = _private_dir()
    except OSError as e:
        return _no_room(f"no scratch space: {e}")
    inp, res = os.path.join(d, "stdin"), os.path.join(d, "result.json")
    try:
        try:
            with open(inp, "wb") as f:
                f.write(stdin)
        except OSError as e:
            return _no_room(f"no room for the input: {e}")
        cmd = [AGENT_HELPER, "--timeout", f"{timeout:g}", "--max-output", str(int(max_output)),
               "--cwd", cwd, "--stdin", inp, "--result", res, "--", *argv]
        try:
            p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True,
                               timeout=timeout + 30)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PlatformError(f"sbx-as-agent: {e}") from None
        try:
            with open(res) as f:
                record = json.load(f)
        except (OSError, ValueError):
            record = None
        if not isinstance(record, dict) or "reason" not in record:
            if _disk_full(d):
                return _no_room("the disk filled up")
            raise PlatformError(f"sbx-as-agent failed (exit {p.returncode}): "
                                f"{p.stderr[-300:].decode(errors='replace')}")
        return AgentRun(record, p.stdout, p.stderr)
    finally:
        for name in (inp, res):
            try:
                os.unlink(name)
            except OSError:
                pass
        try:
            os.rmdir(d)
        except OSError:
            pass


def _norm_text(b):
    """Output as text for the default comparison: invalid UTF-8 replaced, line endings and
    trailing whitespace of lines and of the whole output ignored."""
    s = b.decode("utf-8", errors="replace") if isinstance(b, bytes) else b
    return "\n".join(line.rstrip() for line in s.replace("\r\n", "\n").split("\n")).rstrip()


def compare_program(argv, cases, timeout=DEFAULT_TIMEOUT, max_output=DEFAULT_MAX_OUTPUT,
                    exact=False, cwd="/workspace"):
    """The agent's program on hidden inputs against hidden outputs: cases is a list of
    (stdin, expected_stdout) or (stdin, expected_stdout, extra_args). True when every run exits
    0 by itself and prints the expected output (exact=False: compared as _norm_text; a NUL byte
    never matches text without one). Stops at the first failing case."""
    for case in cases:
        stdin, want = case[0], case[1]
        extra = list(case[2]) if len(case) > 2 else []
        r = run_agent(list(argv) + extra, stdin, timeout, max_output, cwd)
        if not r.ok:
            return False
        if exact:
            w = want.encode() if isinstance(want, str) else want
            if r.stdout != w:
                return False
        elif _norm_text(r.stdout) != _norm_text(want):
            return False
    return True


# The program run as the agent: import the module from the workspace, call the function on each
# input line (a JSON array of arguments), print "<nonce> <index> <json>" per case. The agent's
# own prints go to stderr. json is imported before the workspace is on sys.path.
_DRIVER = r"""
import json, sys
nonce, module, function, encoding = sys.argv[1:5]
out = sys.stdout
sys.stdout = sys.stderr
sys.path.insert(0, sys.argv[5])
try:
    f = getattr(__import__(module), function)
except BaseException as e:
    print(nonce, -1, json.dumps({"error": type(e).__name__ + ": " + str(e)[:200]}), file=out)
    sys.exit(0)
for i, line in enumerate(sys.stdin):
    try:
        v = f(*json.loads(line))
        rec = {"value": repr(v)} if encoding == "repr" else {"value": v}
        text = json.dumps(rec, allow_nan=True)
    except BaseException as e:
        text = json.dumps({"error": type(e).__name__ + ": " + str(e)[:200]})
    print(nonce, i, text, file=out, flush=True)
"""


def _same(got, want, rel_tol):
    """Equal values, with bool distinct from numbers, int == float, floats within rel_tol."""
    if isinstance(want, bool) or isinstance(got, bool):
        return type(got) is type(want) and got == want
    if isinstance(want, (int, float)) and isinstance(got, (int, float)):
        if isinstance(want, float) or isinstance(got, float):
            return (math.isnan(want) and math.isnan(got)) or math.isclose(
                got, want, rel_tol=rel_tol, abs_tol=rel_tol)
        return got == want
    if isinstance(want, (list, tuple)):
        return (isinstance(got, (list, tuple)) and len(got) == len(want)
                and all(_same(g, w, rel_tol) for g, w in zip(got, want)))
    if isinstance(want, dict):
        return (isinstance(got, dict) and set(got) == set(want)
                and all(_same(got[k], want[k], rel_tol) for k in want))
    return type(got) is type(want) and got == want


def call_results(module, function, inputs, timeout=DEFAULT_TIMEOUT, encoding="json",
                 workspace="/workspace", python="python3"):
    """Call module.function(*args) for each args in inputs in ONE process of the agent user;
    returns a list with, per input, ("value", v) or ("error", message). v is the decoded JSON
    (encoding "json") or the repr() string (encoding "repr"). The expected values are not an
    argument: they never reach the agent's process."""
    nonce = secrets.token_hex(8)
    stdin = "".join(json.dumps(list(a)) + "\n" for a in inputs)
    r = run_agent([python, "-I", "-c", _DRIVER, nonce, module, function, encoding, workspace],
                  stdin, timeout, DEFAULT_MAX_OUTPUT, workspace)
    results = [("error", f"no result ({r.reason}, exit {r.exit_code})")] * len(inputs)
    seen = set()
    for line in r.stdout.decode("utf-8", errors="replace").splitlines():
        parts = line.split(" ", 2)
        if len(parts) != 3 or parts[0] != nonce:
            continue
        try:
            i, rec = int(parts[1]), json.loads(parts[2])
        except ValueError:
            continue
        if i == -1:
            return [("error", rec.get("error", "import failed"))] * len(inputs)
        if not 0 <= i < len(inputs) or i in seen or not isinstance(rec, dict):
            return [("error", "bad or repeated result line")] * len(inputs)
        seen.add(i)
        results[i] = ("value", rec["value"]) if "value" in rec else ("error", str(rec.get("error")))
    return results


def call_functions(module, function, cases, timeout=DEFAULT_TIMEOUT, encoding="json",
                   rel_tol=1e-9, workspace="/workspace"):
    """The agent's function on hidden inputs, compared here: cases is a list of
    (args, expected). True when every call returns the expected value (encoding "repr":
    repr(returned) == repr(expected))."""
    res = call_results(module, function, [a for a, _ in cases], timeout, encoding, workspace)
    for (kind, got), (_, want) in zip(res, cases):
        if kind != "value":
            return False
        if encoding == "repr":
            if got != repr(want):
                return False
        elif not _same(got, want, rel_tol):
            return False
    return True


def read_workspace_file(path, max_bytes=1 << 20):
    """A data-only grader's read: the bytes of a regular file (no symlink at the last
    component, no FIFO or device), at most max_bytes; None otherwise. Runs no agent code."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            return None
        return f.read(max_bytes + 1)[:max_bytes]


def verdict(passed):
    """Exit 0 when passed, else 1."""
    sys.exit(0 if passed else 1)


def main(fn):
    """Run fn() -> bool as the grader: exit 0/1 by its answer, 125 on PlatformError."""
    try:
        passed = fn()
    except PlatformError as e:
        print(f"sbx_grade: platform failure: {e}", file=sys.stderr)
        sys.exit(PLATFORM_EXIT)
    verdict(passed)
