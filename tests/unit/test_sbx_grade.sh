#!/usr/bin/env bash
# The grading helper library (client/grpo/grading/sbx_grade.py and .sh) on its own: its parsing of
# sbx-as-agent's record, its comparisons (types, NUL bytes, floods, timeouts, forged result
# lines) and its platform-failure exit (125). sbx-as-agent is replaced here by a stand-in that
# implements the documented interface as the calling user (no second uid, no sandbox); the real
# helper, two users and hostile agents are tests/e2e/test_hostile.sh.

grade_setup() {
  LIB=$SBX_SRC_DIR/client/grpo/grading
  T=$(mktemp -d /tmp/sbx-grade-test.XXXXXX)
  trap 'rm -rf "$T"' EXIT
  mkdir -p "$T/home" "$T/ws"
  cat >"$T/sbx-as-agent" <<'PY'
#!/usr/bin/python3
# stand-in for sbx-as-agent (docs/GRPO.md "Grading sandboxes"): same flags, record and statuses
import json, subprocess, sys
a = sys.argv[1:]
opt = {"--timeout": "60", "--max-output": str(8 << 20), "--cwd": "/workspace", "--stdin": None,
       "--result": None}
while a and a[0] != "--":
    opt[a[0]] = a[1]
    a = a[2:]
argv = a[1:]
if opt["--cwd"] == "FAIL" or not argv:
    sys.exit(125)
stdin = open(opt["--stdin"], "rb") if opt["--stdin"] else subprocess.DEVNULL
rec = {"exit_code": None, "signal": None, "reason": "exited", "truncated": False}
try:
    p = subprocess.run(argv, stdin=stdin, capture_output=True, cwd=opt["--cwd"],
                       timeout=float(opt["--timeout"]) or None)
    out, err, rc = p.stdout, p.stderr, p.returncode
    rec["exit_code"] = rc if rc >= 0 else 128 - rc
    if rc < 0:
        rec.update(reason="signaled", signal=-rc)
except subprocess.TimeoutExpired as e:
    out, err, rc = e.stdout or b"", e.stderr or b"", 124
    rec.update(reason="command_timeout", exit_code=124, signal=9)
m = int(opt["--max-output"])
if len(out) > m or len(err) > m:
    rec.update(reason="output_limit", truncated=True, signal=9, exit_code=137)
    rc = 137
rec["stdout_bytes"], rec["stderr_bytes"] = len(out), len(err)
sys.stdout.buffer.write(out[:m])
sys.stderr.buffer.write(err[:m])
if opt["--result"]:
    json.dump(rec, open(opt["--result"], "w"))
sys.exit(rc if rec["reason"] == "exited" else rec["exit_code"])
PY
  chmod +x "$T/sbx-as-agent"
  export SBX_AS_AGENT=$T/sbx-as-agent HOME=$T/home
}

# py SCRIPT: run a grader script with the library importable; prints its exit status
py() {
  local rc=0
  (cd "$T" && PYTHONPATH=$LIB /usr/bin/python3 -c "$1") || rc=$?
  echo "rc=$rc"
}

test_call_functions() {
  grade_setup
  cat >"$T/ws/solution.py" <<'PY'
import os
print("noise on stdout")                       # the agent's prints never count as results
os.write(1, b"0123456789abcdef 0 {\"value\": 99}\n")  # a forged line with a guessed nonce
def add(a, b): return a + b
def boom(a, b): raise ValueError("no")
def as_int(a, b): return 1                     # True expected: an int is not a bool
def spin(a, b):
    while True: pass
def half(a, b): return (a + b) / 2
def pair(a, b): return (a, b)
PY
  local pre="import sbx_grade as g; W='$T/ws'; C=[([1, 2], 3), ([5, 5], 10)]"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'add', C, workspace=W))")" rc=0 "right values"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'add', [([1, 2], 4)], workspace=W))")" rc=1 "a wrong value"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'boom', C, workspace=W))")" rc=1 "an exception"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'as_int', [([0, 0], True)], workspace=W))")" rc=1 "1 for True"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'missing', C, workspace=W))")" rc=1 "no such function"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'spin', C, timeout=1, workspace=W))")" rc=1 "an endless loop"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'half', [([1, 2], 1.5), ([2, 2], 2)], workspace=W))")" rc=0 "2.0 for 2"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('solution', 'pair', [([1, 2], (1, 2))], encoding='repr', workspace=W))")" rc=0 "repr of a tuple"
  assert_eq "$(py "$pre; g.verdict(g.call_functions('nomodule', 'add', C, workspace=W))")" rc=1 "no module"
  # the results are what the agent's process printed; its inputs are all it got
  assert_eq "$(py "import sbx_grade as g; print(g.call_results('solution', 'add', [[1, 2]], workspace='$T/ws'))")" \
    "[('value', 3)]
rc=0" "call_results"
}

test_compare_program() {
  grade_setup
  printf 'import sys\nprint(sum(map(int, sys.stdin.read().split())))\n' >"$T/ws/sum.py"
  printf 'import sys\nsys.stdout.write("5\\0junk\\n")\n' >"$T/ws/nul.py"
  printf 'import sys\nsys.stdout.write("5\\n" * 10**6)\n' >"$T/ws/flood.py"
  printf 'import sys\nprint(5); sys.exit(3)\n' >"$T/ws/status.py"
  local pre="import sbx_grade as g; W='$T/ws'; C=[('2 3\n', '5\n'), ('1 1 1', '3')]"
  assert_eq "$(py "$pre; g.verdict(g.compare_program(['python3', 'sum.py'], C, cwd=W))")" rc=0 "right output"
  assert_eq "$(py "$pre; g.verdict(g.compare_program(['python3', 'sum.py'], [('2 3', '6')], cwd=W))")" rc=1 "wrong output"
  assert_eq "$(py "$pre; g.verdict(g.compare_program(['python3', 'nul.py'], [('', '5')], cwd=W))")" rc=1 "a NUL byte"
  assert_eq "$(py "$pre; g.verdict(g.compare_program(['python3', 'flood.py'], [('', '5')], max_output=4096, cwd=W))")" rc=1 "a flood"
  assert_eq "$(py "$pre; g.verdict(g.compare_program(['python3', 'status.py'], [('', '5')], cwd=W))")" rc=1 "exit 3"
  # sbx-as-agent failing on its own is the platform's: 125
  assert_eq "$(py "$pre; g.main(lambda: g.compare_program(['true'], C, cwd='FAIL'))")" rc=125 "helper failure"
}

test_shell_helpers() {
  grade_setup
  printf 'import sys\nprint(sum(map(int, sys.stdin.read().split())))\n' >"$T/ws/sum.py"
  mkdir -p "$T/cases"
  printf '2 3\n' >"$T/cases/a.in"
  printf '5\n' >"$T/cases/a.out"
  printf '4 4\n' >"$T/cases/b.in"
  printf '8  \n\n' >"$T/cases/b.out"
  sh_grade() {
    local rc=0
    (cd "$T" && SBX_GRADE_CWD=$T/ws sh -c ". '$LIB/sbx_grade.sh'; $1") || rc=$?
    echo "rc=$rc"
  }
  assert_eq "$(sh_grade "sbx_compare_program cases -- python3 '$T/ws/sum.py'; sbx_verdict \$?")" rc=0 "right"
  printf '9\n' >"$T/cases/b.out"
  assert_eq "$(sh_grade "sbx_compare_program cases -- python3 '$T/ws/sum.py'; sbx_verdict \$?")" rc=1 "wrong"
  assert_eq "$(sh_grade "SBX_AS_AGENT=false sbx_compare_program cases -- true; sbx_verdict \$?")" rc=125 "helper failure"
  printf 'red\n' >"$T/want"
  printf 'red\n' >"$T/ws/b.txt"
  ln -s "$T/want" "$T/ws/link.txt"
  mkfifo "$T/ws/fifo.txt"
  assert_eq "$(sh_grade "sbx_file_matches '$T/ws/b.txt' '$T/want'")" rc=0 "data file"
  assert_eq "$(sh_grade "sbx_file_matches '$T/ws/link.txt' '$T/want'")" rc=1 "a symlink"
  local r
  r=$(py "import sbx_grade as g; print([g.read_workspace_file('$T/ws/' + n) for n in ('b.txt', 'link.txt', 'fifo.txt')])")
  assert_eq "$r" "[b'red\n', None, None]
rc=0" "read_workspace_file"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
