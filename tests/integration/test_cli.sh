#!/usr/bin/env bash
# The sbx CLI against real daemons: exit codes pass through (128+signal, 124 on timeout, 127/126 for
# a command that cannot start), output streams before the command exits, -i forwards stdin, cp both
# ways for a file and a directory (a file into a directory; a directory out fetched once), --json
# output parses (binary output as base64), a helpful error when the daemon is not running, usage
# errors exit 2, run removes its sandbox, run -i streams stdin (3 MiB) and keeps the rest of run,
# placement across two daemons (one full) falls back on 503, pause and resume of a pausable sandbox,
# output to a non-blocking or closed stdout, sbx started with stdin/stdout/stderr closed, bad
# numbers refused, one clear line for a bad flag, volume rm / inspect going on past a failure,
# create --json terminating a sandbox it cannot read back, sbx run's own failures exiting 125,
# and a plain sbx exec's Ctrl-C ending sbx at once while the command goes on (as docker exec).

DAEMON_TAG=cli
source "$(dirname "$0")/../lib/daemon.sh"

SBX=
T=

json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

setup() {
  set +e # every step is checked explicitly
  require_root
  SBX=$(bin sbx)
  [ -x "$SBX" ] || fail "sbx not built"
  daemon_init
  T=$DAEMON_ROOT/files
  mkdir -p "$T"
}

# cli_daemon NAME MAX [EXTRA ARGS...]: daemon instance NAME on ${DAEMON_SOCK[NAME]}
cli_daemon() {
  daemon_start "$1" --max-sandboxes "$2" "${@:3}"
}

one_daemon() {
  setup
  cli_daemon a 8
  export SBX_HOST=${DAEMON_SOCK[a]}
}

new_sandbox() { "$SBX" create --memory 128Mi --timeout 5m "$@"; }

test_exit_codes() {
  one_daemon
  local id rc
  id=$(new_sandbox) || fail "create failed"
  [[ "$id" == sb-* ]] || fail "create printed '$id'"
  "$SBX" exec "$id" -- sh -c 'exit 42'; rc=$?
  assert_eq $rc 42 "exit code passes through"
  "$SBX" exec "$id" -- true; rc=$?
  assert_eq $rc 0 "exit 0"
  "$SBX" exec "$id" --sh -- 'kill -TERM $$'; rc=$?
  assert_eq $rc 143 "SIGTERM gives 128+15"
  "$SBX" exec "$id" --sh -- 'kill -KILL $$'; rc=$?
  assert_eq $rc 137 "SIGKILL gives 128+9"
  "$SBX" exec --timeout 1s "$id" -- sleep 30 2>"$T/err"; rc=$?
  assert_eq $rc 124 "command_timeout gives 124"
  grep -q "timed out" "$T/err" || fail "no timeout note on stderr"
  "$SBX" exec "$id" -- /nonexistent/binary 2>/dev/null; rc=$?
  [ $rc -ne 0 ] || fail "a missing binary must not exit 0"
  # run: create + exec + remove
  local before after
  "$SBX" run --memory 128Mi --label cli=run -- sh -c 'echo inside; exit 5' >"$T/out"; rc=$?
  assert_eq $rc 5 "run passes the exit code through"
  assert_eq "$(cat "$T/out")" "inside" "run output"
  after=$("$SBX" ls --json --label cli=run | json "[s['state'] for s in d]")
  assert_eq "$after" "['ended']" "run removed its sandbox"
  "$SBX" rm "$id" >/dev/null || fail "rm failed"
  "$SBX" exec "$id" -- true 2>"$T/err"; rc=$?
  assert_eq $rc 1 "exec on a removed sandbox is an error"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "error message is not one line: $(cat "$T/err")"
}

# A command that cannot start exits as docker exec/run and a shell do: 127 when its program is not
# found, 126 when it is found but cannot be run (a directory, a file without x), in every way
# sbx starts one (plain, -i, -d, --json; run plain and -i, which still removes its sandbox); a
# missing --cwd stays sbx's own error (1), and a command's own 126/127 pass through. (Before,
# sbx exited 1 for all of them.)
test_cannot_start() {
  one_daemon
  local id rc args want flags cmd
  id=$(new_sandbox) || fail "create failed"
  "$SBX" exec "$id" --sh -- 'printf "echo hi\n" >plain.sh && chmod 644 plain.sh' || fail "plain.sh"
  # WANT:FLAGS:COMMAND
  for args in "127::/nonexistent/binary" "127::no-such-program-anywhere" "126::/etc" \
    "126::./plain.sh" "127:-i:/nonexistent/binary" "126:-i:/etc" "127:-d:/nonexistent/binary" \
    "126:-d:./plain.sh" "127:--json:/nonexistent/binary" "126:--json:./plain.sh" \
    "127:-t:/nonexistent/binary" "1:--cwd /nope:true" "127:--sh:exit 127" "126:--sh:exit 126"; do
    want=${args%%:*} args=${args#*:} flags=${args%%:*} cmd=${args#*:}
    # shellcheck disable=SC2086 # the words are meant to split
    "$SBX" exec $flags "$id" -- $cmd </dev/null >"$T/out" 2>"$T/err"; rc=$?
    assert_eq "$rc" "$want" "sbx exec ${flags:+$flags }ID -- $cmd: $(cat "$T/err")"
    [[ "$flags" == --sh ]] || [ "$(wc -l <"$T/err")" -eq 1 ] ||
      fail "sbx exec ${flags:+$flags }ID -- $cmd: not one line: $(cat "$T/err")"
  done
  grep -q "exec /nonexistent/binary: No such file or directory" <("$SBX" exec "$id" -- \
    /nonexistent/binary 2>&1) || fail "the daemon's reason is not shown"
  for args in "127::/nonexistent/binary" "126::/etc" "127:-i:/nonexistent/binary" "126:-i:/etc"; do
    want=${args%%:*} args=${args#*:} flags=${args%%:*} cmd=${args#*:}
    # shellcheck disable=SC2086 # the words are meant to split
    "$SBX" run --memory 128Mi --label cli=nostart $flags -- $cmd </dev/null >"$T/out" 2>"$T/err"
    rc=$?
    assert_eq "$rc" "$want" "sbx run ${flags:+$flags }-- $cmd: $(cat "$T/err")"
  done
  assert_eq "$("$SBX" ls --json --label cli=nostart | json "[s['state'] for s in d]")" \
    "['ended', 'ended', 'ended', 'ended']" "run removed its sandboxes"
}

# sbx run's own failures exit 125, as docker run's, so that they differ from its command's 1: no
# daemon, a create refused, a command it could not start for a reason not the command's (a --cwd
# not there; plain, -i, --json), output it cannot write (a full device), removing its sandbox; the
# command's 1 stays 1, a usage error 2 and sbx exec's own failure 1. (Before, all of them but the
# usage error exited 1.)
test_run_failures_exit_125() {
  one_daemon
  local rc args
  SBX_HOST=$T/none.sock "$SBX" run -- true 2>"$T/err"; rc=$?
  assert_eq "$rc/$(wc -l <"$T/err")" "125/1" "run with no daemon: $(cat "$T/err")"
  grep -q "cannot reach sandboxd" "$T/err" || fail "run with no daemon: $(cat "$T/err")"
  "$SBX" run --image no-such-image --label cli=fail125 -- true 2>"$T/err"; rc=$?
  assert_eq "$rc" 125 "run with an unknown image: $(cat "$T/err")"
  for args in "" "-i" "--json"; do
    # shellcheck disable=SC2086 # the words are meant to split
    "$SBX" run --memory 128Mi --label cli=fail125 $args --cwd /nope -- true </dev/null \
      >/dev/null 2>"$T/err"; rc=$?
    assert_eq "$rc" 125 "run $args --cwd /nope: $(cat "$T/err")"
    grep -q "chdir /nope" "$T/err" || fail "run $args --cwd /nope: $(cat "$T/err")"
  done
  "$SBX" run --memory 128Mi --label cli=fail125 -- head -c 100 /dev/zero >/dev/full 2>"$T/err"
  rc=$?
  assert_eq "$rc" 125 "run to a full device: $(cat "$T/err")"
  assert_eq "$("$SBX" ls --json --label cli=fail125 | json "[s['state'] for s in d]")" \
    "['ended', 'ended', 'ended', 'ended']" "run removed its sandboxes"
  "$SBX" run --memory 128Mi -- false; rc=$?
  assert_eq "$rc" 1 "the command's own 1"
  "$SBX" run --bogus -- true 2>/dev/null; rc=$?
  assert_eq "$rc" 2 "a usage error"
  SBX_HOST=$T/none.sock "$SBX" exec sb-x -- true 2>/dev/null; rc=$?
  assert_eq "$rc" 1 "sbx exec's own failure"
}

test_run_interrupted() {
  one_daemon
  "$SBX" run --memory 128Mi --label cli=int -- sh -c 'sleep 60' &
  local pid=$! i state
  for i in $(seq 100); do
    state=$("$SBX" ls --json --label cli=int | json "','.join(s['state'] for s in d)")
    [ "$state" == "running" ] && break
    sleep 0.1
  done
  assert_eq "$state" "running" "run's sandbox started"
  sleep 0.3
  kill -INT $pid
  wait $pid; local rc=$?
  assert_eq $rc 130 "Ctrl-C exits 130"
  state=$("$SBX" ls --json --label cli=int | json "','.join(s['state'] for s in d)")
  assert_eq "$state" "ended" "the sandbox was removed after Ctrl-C"
}

# Ctrl-C (SIGINT) to a plain `sbx exec` (no -i, -t: no raw mode, nothing forwarded): sbx exits at
# once, by the signal (130), with nothing on stderr, and the command goes on in the sandbox, as
# `docker exec` and `kubectl exec` without -t leave it; its --timeout, `sbx kill` or the sandbox's
# end stop it. `env --default-signal=INT` undoes the SIGINT that bash ignores for background jobs.
test_exec_interrupted() {
  one_daemon
  local id pid rc i t0 took
  id=$(new_sandbox) || fail "create failed"
  env --default-signal=INT "$SBX" exec "$id" -- \
    sh -c 'echo started; sleep 1; touch /tmp/after; exec sleep 1000' >"$T/out" 2>"$T/err" &
  pid=$!
  for i in $(seq 100); do
    [ "$(cat "$T/out")" == started ] && break
    sleep 0.1
  done
  assert_eq "$(cat "$T/out")" "started" "the command started"
  t0=$(date +%s%N)
  kill -INT $pid
  wait $pid; rc=$?
  took=$((($(date +%s%N) - t0) / 1000000))
  assert_eq "$rc/$(cat "$T/err")" "130/" "sbx exec: Ctrl-C exits 130 without a word"
  [ "$took" -lt 1000 ] || fail "sbx exec exited ${took} ms after SIGINT"
  for i in $(seq 50); do
    "$SBX" exec "$id" -- test -e /tmp/after && break
    sleep 0.1
  done
  "$SBX" exec "$id" -- test -e /tmp/after || fail "the command stopped at sbx exec's Ctrl-C"
  "$SBX" exec "$id" -- sh -c 'cat /proc/[0-9]*/cmdline | tr "\0" " "' >"$T/ps"
  grep -q "sleep 1000" "$T/ps" || fail "the command no longer runs: $(cat "$T/ps")"
}

# sbx run -i streams stdin as sbx exec -i does (it read all of it first and sent it in the
# exec's JSON body, so input over the body's limit failed), keeping what run does: the exit
# status, --cmd-timeout, --json, --cwd and env, and the sandbox removed after each, also on Ctrl-C
test_run_stdin() {
  one_daemon
  local rc out want pid state i
  head -c 3145728 /dev/urandom >"$T/in" || fail "no input"
  want=$(sha256sum <"$T/in")
  out=$("$SBX" run --memory 128Mi --label cli=run-i -i -- sha256sum <"$T/in" 2>"$T/err"); rc=$?
  assert_eq "$rc/$(cat "$T/err")" "0/" "run -i with 3 MiB of stdin"
  assert_eq "${out%% *}" "${want%% *}" "3 MiB of stdin arrive whole"
  "$SBX" run --memory 128Mi --label cli=run-i -i --sh -- 'head -c 10 >/dev/null; exit 7' <"$T/in"; rc=$?
  assert_eq $rc 7 "run -i passes the exit code through (stdin left unread)"
  "$SBX" run --memory 128Mi --label cli=run-i -i --sh -- 'kill -TERM $$' </dev/null; rc=$?
  assert_eq $rc 143 "run -i: SIGTERM gives 128+15"
  "$SBX" run --memory 128Mi --label cli=run-i -i --cmd-timeout 1s -- sleep 30 </dev/null 2>"$T/err"; rc=$?
  assert_eq $rc 124 "run -i: command_timeout gives 124"
  grep -q "timed out" "$T/err" || fail "run -i: no timeout note on stderr: $(cat "$T/err")"
  out=$(printf 'x' | "$SBX" run --memory 128Mi --label cli=run-i --env FOO=bar -i --cwd /tmp --sh -- \
    'echo "$(cat) $FOO $(pwd)"'); rc=$?
  assert_eq "$rc/$out" "0/x bar /tmp" "run -i with --env and --cwd"
  out=$(printf 'abc' | "$SBX" run --json --memory 128Mi --label cli=run-i -i --sh -- 'cat; echo e >&2; exit 3'); rc=$?
  assert_eq $rc 3 "run -i --json exits with the command's code"
  assert_eq "$(json "[d['exit_code'], d['stdout'], d['stderr'], d['reason']]" <<<"$out")" \
    "[3, 'abc', 'e\\n', 'exited']" "run -i --json: the output collected into the result"
  # a reader that goes away: 141 without a word (cli_stream_output), the sandbox still goes
  ("$SBX" run --memory 128Mi --label cli=run-i -i -- yes <"$T/in" 2>"$T/err" | head -1 >/dev/null
    exit "${PIPESTATUS[0]}"); rc=$?
  assert_eq "$rc/$(cat "$T/err")" "141/" "run -i to a closed pipe"
  assert_eq "$("$SBX" ls --json --label cli=run-i | json "[s['state'] for s in d]")" \
    "$(python3 -c "print(['ended'] * 7)")" "run -i removed each of its sandboxes"
  # Ctrl-C while the command waits for more stdin (a fifo kept open)
  mkfifo "$T/fifo"
  exec 4<>"$T/fifo"
  "$SBX" run --memory 128Mi --label cli=run-i-int -i -- cat <"$T/fifo" >"$T/out" &
  pid=$!
  echo hello >&4
  for i in $(seq 100); do
    [ "$(cat "$T/out")" == hello ] && break
    sleep 0.1
  done
  assert_eq "$(cat "$T/out")" "hello" "run -i: stdin reached the command before its end"
  kill -INT $pid
  wait $pid; rc=$?
  exec 4>&-
  assert_eq $rc 130 "run -i: Ctrl-C exits 130"
  state=$("$SBX" ls --json --label cli=run-i-int | json "','.join(s['state'] for s in d)")
  assert_eq "$state" "ended" "run -i: the sandbox was removed after Ctrl-C"
}

test_streaming_order() {
  one_daemon
  local id line
  id=$(new_sandbox) || fail "create failed"
  mkfifo "$T/fifo"
  # the command waits (60 s at most, longer than the first read's 20) for a file that is made
  # only once its first line is read
  "$SBX" exec "$id" --sh -- 'echo first; i=0; while [ ! -e /tmp/go ] && [ $i -lt 1200 ]; do
    sleep 0.05; i=$((i+1)); done; echo second; exit 3' >"$T/fifo" &
  local pid=$!
  exec 3<"$T/fifo"
  read -r -t 20 line <&3 || fail "no first line (within 20 s)"
  assert_eq "$line" "first" "first line"
  kill -0 $pid 2>/dev/null || fail "the first line arrived only after sbx exited (not streamed)"
  "$SBX" exec "$id" -- touch /tmp/go || fail "touch /tmp/go"
  read -r -t 30 line <&3 || fail "no second line"
  assert_eq "$line" "second" "second line"
  exec 3<&-
  wait $pid; local rc=$?
  assert_eq $rc 3 "exit code after streaming"
}

test_stdin() {
  one_daemon
  local id out
  id=$(new_sandbox) || fail "create failed"
  out=$(printf 'abc\nline two\n' | "$SBX" exec -i "$id" -- cat) || fail "exec -i failed"
  assert_eq "$out" $'abc\nline two' "stdin forwarded with -i"
  out=$(printf 'zzz\n' | "$SBX" exec "$id" -- cat) || fail "exec failed"
  assert_eq "$out" "" "stdin not forwarded without -i"
  out=$(head -c 3000 /dev/urandom | "$SBX" exec -i "$id" -- wc -c) || fail "binary stdin"
  assert_eq "$out" "3000" "binary stdin arrives whole"
}

test_cp() {
  one_daemon
  local id
  id=$(new_sandbox) || fail "create failed"
  head -c 100000 /dev/urandom >"$T/file.bin"
  "$SBX" cp "$T/file.bin" "$id:/workspace/up/file.bin" || fail "cp file in"
  assert_eq "$("$SBX" exec "$id" -- wc -c /workspace/up/file.bin)" "100000 /workspace/up/file.bin" "size inside"
  "$SBX" cp "$id:/workspace/up/file.bin" "$T/back.bin" || fail "cp file out"
  cmp "$T/file.bin" "$T/back.bin" || fail "file differs after the round trip"
  # one file keeps its permission bits, as with docker cp (it was 0644 whatever it was)
  printf '#!/bin/sh\necho ran\n' >"$T/one.sh"
  chmod 750 "$T/one.sh"
  "$SBX" cp "$T/one.sh" "$id:/workspace/one.sh" || fail "cp script in"
  assert_eq "$("$SBX" exec "$id" -- stat -c %a /workspace/one.sh)" "750" "one file's mode inside"
  assert_eq "$("$SBX" exec "$id" -- /workspace/one.sh)" "ran" "one file runs inside"
  chmod 600 "$T/file.bin"
  "$SBX" cp "$T/file.bin" "$id:/workspace/up/file.bin" || fail "cp file over"
  assert_eq "$("$SBX" exec "$id" -- stat -c %a /workspace/up/file.bin)" "600" "mode of a file copied over"
  mkdir -p "$T/dir/sub/deeper"
  echo one >"$T/dir/a.txt"
  echo two >"$T/dir/sub/b.txt"
  printf '#!/bin/sh\necho x\n' >"$T/dir/sub/deeper/run.sh"
  chmod 755 "$T/dir/sub/deeper/run.sh"
  "$SBX" cp "$T/dir" "$id:/workspace/d" || fail "cp dir in"
  assert_eq "$("$SBX" exec "$id" -- cat /workspace/d/sub/b.txt)" "two" "file of the dir inside"
  assert_eq "$("$SBX" exec "$id" -- /workspace/d/sub/deeper/run.sh)" "x" "mode kept inside"
  "$SBX" exec "$id" --sh -- 'mkdir -p /workspace/made/x && echo made >/workspace/made/x/m.txt' ||
    fail "prepare dir"
  "$SBX" cp "$id:/workspace/d" "$T/out" || fail "cp dir out"
  diff -r "$T/dir" "$T/out" || fail "directory differs after the round trip"
  "$SBX" cp "$id:/workspace/made" "$T/made" || fail "cp made dir out"
  assert_eq "$(cat "$T/made/x/m.txt")" "made" "file made inside, copied out"
  "$SBX" cp "$id:/workspace/nope" "$T/nope" 2>"$T/err"; local rc=$?
  assert_eq $rc 1 "missing remote path"
  "$SBX" cp "$T/dir" "$T/dir2" 2>/dev/null; rc=$?
  assert_eq $rc 2 "two local paths is a usage error"
  # a file copied to a directory goes into it under its own name, as with docker cp (the
  # daemon's "Is a directory" / "names a directory" was the answer)
  echo into >"$T/into.txt"
  "$SBX" cp "$T/into.txt" "$id:/workspace/made" || fail "cp a file to an existing directory"
  assert_eq "$("$SBX" exec "$id" -- cat /workspace/made/into.txt)" "into" "the file in the directory"
  "$SBX" cp "$T/into.txt" "$id:/workspace/" || fail "cp a file to a path ending with /"
  assert_eq "$("$SBX" exec "$id" -- cat /workspace/into.txt)" "into" "the file under /workspace/"
  # "-" is a tar stream, as with docker cp (it made a local directory named "-", and read no
  # stdin): a directory and a file out under their own names, a tar in unpacked into a directory
  (cd "$T" && "$SBX" cp "$id:/workspace/d" - >"$T/d.tar") || fail "cp a directory to -"
  assert_eq "$(tar -tf "$T/d.tar" | sort | tr '\n' ' ')" \
    "d/ d/a.txt d/sub/ d/sub/b.txt d/sub/deeper/ d/sub/deeper/run.sh " "the directory's tar"
  [ ! -e "$T/-" ] || fail "a local file named - was made"
  mkdir "$T/untar" && tar -xf "$T/d.tar" -C "$T/untar" || fail "untar"
  diff -r "$T/dir" "$T/untar/d" || fail "the directory differs after cp ... -"
  assert_eq "$("$SBX" cp "$id:/workspace/d/sub/b.txt" - | tar -xOf - b.txt)" "two" "a file's tar"
  "$SBX" exec "$id" -- touch /workspace/empty || fail "touch"
  assert_eq "$("$SBX" cp "$id:/workspace/empty" - | tar -tvf - | cut -c1)" "-" "an empty file's tar"
  tar -cf - -C "$T/dir" . | "$SBX" cp - "$id:/workspace/fromtar" || fail "cp - into a directory"
  assert_eq "$("$SBX" exec "$id" -- /workspace/fromtar/sub/deeper/run.sh)" "x" "the tar unpacked"
}

test_json_output() {
  one_daemon
  local id v
  v=$("$SBX" --json info | json "d['free_slots'] >= 0") || fail "info --json"
  assert_eq "$v" "True" "info --json"
  id=$("$SBX" create --json --memory 128Mi --label j=1 | json "d['id']") || fail "create --json"
  [[ "$id" == sb-* ]] || fail "create --json id '$id'"
  v=$("$SBX" inspect --json "$id" | json "type(d['cost_usd']).__name__ in ('float','int') and d['state']")
  assert_eq "$v" "running" "inspect --json"
  v=$("$SBX" ls --json --label j=1 | json "[s['id'] for s in d] == ['$id']")
  assert_eq "$v" "True" "ls --json --label"
  v=$("$SBX" exec --json "$id" -- sh -c 'echo hi; exit 4' | json "(d['exit_code'], d['stdout'], d['reason'])")
  assert_eq "$v" "(4, 'hi\\n', 'exited')" "exec --json"
  # output that is not UTF-8 comes whole as base64, as the API sends it ("(not valid UTF-8)")
  v=$("$SBX" exec --json "$id" -- printf '\377\376abc' | json "(d.get('stdout'), d['stdout_b64'], d['stderr'])")
  assert_eq "$v" "(None, '//5hYmM=', '')" "exec --json of binary output"
  v=$(printf '\377' | "$SBX" exec -i --json "$id" -- cat | json "(d.get('stdout'), d['stdout_b64'])")
  assert_eq "$v" "(None, '/w==')" "exec -i --json of binary output"
  "$SBX" inspect "$id" | grep '^cost_usd ' >/dev/null || fail "human inspect shows cost_usd"
  "$SBX" ls | grep "^$id " >/dev/null || fail "human ls lists the sandbox"
}

# sbx create --pausable, sbx pause, sbx resume: the background process and its memory come back
# (the daemon side in detail: test_pause.sh); a sandbox not pausable is refused (exit 1).
TEST_TIMEOUT_pause_resume=90
test_pause_resume() {
  one_daemon
  command -v criu >/dev/null || skip "criu is needed (tests/deps.sh builds CRIU 4)"
  local id plain out
  id=$(new_sandbox --pausable) || fail "create --pausable"
  # the counter is replaced whole (a reader never sees the file truncated and not yet written)
  "$SBX" exec "$id" -- sh -c 'python3 -c "import os, time
x = 0
while True:
    x += 1
    open(\"/tmp/x.new\", \"w\").write(str(x))
    os.replace(\"/tmp/x.new\", \"/tmp/x\")
    time.sleep(0.05)" </dev/null >/dev/null 2>&1 &' || fail "exec"
  local before= i
  for i in $(seq 50); do
    before=$("$SBX" exec "$id" -- cat /tmp/x 2>/dev/null) && [ -n "$before" ] && break
    sleep 0.1
  done
  [ -n "$before" ] || fail "the counter never started"
  out=$("$SBX" pause "$id") || fail "pause: $out"
  [[ "$out" == "$id paused bytes="* ]] || fail "pause printed '$out'"
  assert_eq "$("$SBX" --json inspect "$id" | json "d['state']")" paused "inspect after pause"
  out=$("$SBX" resume "$id") || fail "resume: $out"
  [[ "$out" == "$id running resume_ms="* ]] || fail "resume printed '$out'"
  sleep 0.2
  local after; after=$("$SBX" exec "$id" -- cat /tmp/x)
  [ "$after" -ge "$before" ] || fail "the counter went back: $before -> $after"
  plain=$(new_sandbox) || fail "create"
  out=$("$SBX" pause "$plain" 2>&1)
  assert_eq "$?" 1 "pause of a sandbox not pausable"
  [[ "$out" == *pausable* ]] || fail "the refusal does not say why: $out"
  "$SBX" pause 2>/dev/null; assert_eq "$?" 2 "pause without an id"
  "$SBX" rm "$id" "$plain" >/dev/null || fail "rm"
}

test_daemon_not_running() {
  setup
  local rc
  "$SBX" --host "$T/none.sock" info 2>"$T/err"; rc=$?
  assert_eq $rc 1 "exit 1 when the daemon is missing"
  [ "$(wc -l <"$T/err")" -eq 1 ] || fail "not one line: $(cat "$T/err")"
  grep -q "cannot reach sandboxd at $T/none.sock: No such file or directory" "$T/err" ||
    fail "unhelpful message: $(cat "$T/err")"
  grep -q "is it running" "$T/err" || fail "no hint: $(cat "$T/err")"
  if [ ! -e /run/sandboxd/sandboxd.sock ]; then
    env -u SBX_HOST "$SBX" ls 2>"$T/err"; rc=$?
    assert_eq $rc 1 "default socket missing"
    grep -q "systemctl start sandboxd" "$T/err" || fail "no start hint: $(cat "$T/err")"
  fi
  "$SBX" --host "$T/none.sock" exec 2>/dev/null; rc=$?
  assert_eq $rc 2 "usage error"
  "$SBX" frobnicate 2>/dev/null; rc=$?
  assert_eq $rc 2 "unknown command"
  "$SBX" --version | grep '^sbx [0-9]' >/dev/null || fail "--version"
  "$SBX" --help | grep 'exec' >/dev/null || fail "--help"
  "$SBX" exec --help | grep -- '--timeout' >/dev/null || fail "exec --help"
  "$SBX" create --memory lots 2>/dev/null; rc=$?
  assert_eq $rc 2 "bad size is a usage error"
}

test_multi_endpoint() {
  setup
  cli_daemon a 1
  cli_daemon b 1
  local hosts="${DAEMON_SOCK[a]},${DAEMON_SOCK[b]}" id1 id2 rc
  # two concurrent creates: both may pick A (equal free slots); one then gets 503 and must
  # fall back to B. Whatever the interleaving, each daemon ends up with exactly one.
  "$SBX" --host "$hosts" create --memory 128Mi >"$T/id1" 2>"$T/e1" &
  local p1=$!
  "$SBX" --host "$hosts" create --memory 128Mi >"$T/id2" 2>"$T/e2" &
  local p2=$!
  wait $p1 || fail "create 1 failed: $(cat "$T/e1")"
  wait $p2 || fail "create 2 failed: $(cat "$T/e2")"
  local na nb
  na=$("$SBX" --host "${DAEMON_SOCK[a]}" ls --json | json "len([s for s in d if s['state']=='running'])")
  nb=$("$SBX" --host "${DAEMON_SOCK[b]}" ls --json | json "len([s for s in d if s['state']=='running'])")
  assert_eq "$na/$nb" "1/1" "one sandbox on each daemon"
  # both full: the client tries each (503, 503) and says so
  "$SBX" --host "$hosts" create --memory 128Mi 2>"$T/err"; rc=$?
  assert_eq $rc 1 "create when every node is full"
  grep -q "every endpoint is full" "$T/err" || fail "message: $(cat "$T/err")"
  # the handle remembers its endpoint: exec and rm find the sandbox on B through the list
  id2=$(cat "$T/id2")
  assert_eq "$("$SBX" --host "$hosts" exec "$id2" -- echo ok)" "ok" "exec through both endpoints"
  "$SBX" --host "$hosts" rm "$(cat "$T/id1")" "$id2" >/dev/null || fail "rm through both endpoints"
  # a dead endpoint is skipped
  id1=$("$SBX" --host "$T/dead.sock,$hosts" create --memory 128Mi) || fail "create with a dead endpoint"
  [[ "$id1" == sb-* ]] || fail "id '$id1'"
  [ "$("$SBX" --host "$hosts" ls --json | json "len(d)")" -ge 3 ] || fail "ls merges endpoints"
}

test_tcp_token() {
  setup
  local port=$(free_port) rc
  cli_daemon t 4 --tcp "127.0.0.1:$port" --token "s3cret-$$"
  local url="http://127.0.0.1:$port"
  env -u SBX_TOKEN "$SBX" --host "$url" info 2>"$T/err"; rc=$?
  assert_eq $rc 1 "no token"
  grep -qi "unauthorized\|token\|401" "$T/err" || fail "message: $(cat "$T/err")"
  SBX_TOKEN=wrong "$SBX" --host "$url" ls 2>/dev/null; rc=$?
  assert_eq $rc 1 "wrong token"
  local id out
  export SBX_TOKEN="s3cret-$$"
  id=$("$SBX" --host "$url" create --memory 128Mi) || fail "create over TCP"
  out=$("$SBX" --host "$url" exec "$id" -- echo tcp) || fail "exec over TCP"
  assert_eq "$out" "tcp" "exec over TCP"
  "$SBX" --host "$url" rm "$id" >/dev/null || fail "rm over TCP"
}

# stdout_nonblocking ARGS...: sbx ARGS with stdout a pipe whose write end is O_NONBLOCK (as some
# harnesses leave it), read only after a second (the pipe is full by then) -> "BYTES RC"
stdout_nonblocking() {
  python3 - "$SBX" "$@" <<'PY'
import fcntl, os, subprocess, sys, time
r, w = os.pipe()
fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
p = subprocess.Popen(sys.argv[1:], stdout=w)
os.close(w)
time.sleep(1)
n = 0
while True:
    b = os.read(r, 1 << 16)
    if not b:
        break
    n += len(b)
print(n, p.wait())
PY
}

# A non-blocking stdout gets all the output (sbx waits for room), and a stdout that cannot be
# written (a closed pipe, SIGPIPE ignored) is an error sbx reports (exit 1), not lost output.
TEST_TIMEOUT_output_to_stdout=90
test_output_to_stdout() {
  one_daemon
  local id rc
  id=$(new_sandbox) || fail "create failed"
  # (the plain exec's stream is kept under max_output, 1 MiB by default: docs/API.md)
  assert_eq "$(stdout_nonblocking exec "$id" -- head -c 1000000 /dev/zero)" "1000000 0" \
    "exec to a non-blocking stdout"
  assert_eq "$(stdout_nonblocking exec -i "$id" -- head -c 10000000 /dev/zero </dev/null)" \
    "10000000 0" "exec -i to a non-blocking stdout"
  assert_eq "$(stdout_nonblocking run --memory 128Mi -- head -c 1000000 /dev/zero)" \
    "1000000 0" "run to a non-blocking stdout"
  # a reader that goes away: exit 141 (SIGPIPE's status) without a word, whether SIGPIPE came
  # ignored or not, and sbx run still ends its sandbox (it died of SIGPIPE and left it running)
  local ign
  for ign in "trap '' PIPE;" ""; do
    (eval "$ign"; "$SBX" exec "$id" -- head -c 10000000 /dev/zero 2>"$T/err" | true; exit "${PIPESTATUS[0]}"); rc=$?
    assert_eq "$rc/$(cat "$T/err")" "141/" "exec to a closed pipe ($ign)"
    (eval "$ign"; "$SBX" exec -i "$id" -- head -c 10000000 /dev/zero </dev/null 2>"$T/err" | true; exit "${PIPESTATUS[0]}"); rc=$?
    assert_eq "$rc/$(cat "$T/err")" "141/" "exec -i to a closed pipe ($ign)"
    (eval "$ign"; "$SBX" run --memory 128Mi --label "cli=pipe${ign:+-ign}" -- sh -c 'yes' 2>"$T/err" | head -1 >/dev/null; exit "${PIPESTATUS[0]}"); rc=$?
    assert_eq "$rc/$(cat "$T/err")" "141/" "run to a closed pipe ($ign)"
    assert_eq "$("$SBX" ls --json --label "cli=pipe${ign:+-ign}" | json "[s['state'] for s in d]")" "['ended']" \
      "run ended its sandbox after its reader went away ($ign)"
  done
  "$SBX" exec "$id" -- head -c 100 /dev/zero 2>"$T/err" >/dev/full; rc=$?
  assert_eq $rc 1 "exec to a full device"
  grep -q "cannot write the command's output: No space left" "$T/err" || fail "exec: $(cat "$T/err")"
  # a plain exec streams up to the API's most, 64 MiB, and says when it cut (it cut at 1 MiB,
  # the default for answers that keep the output, without a word)
  assert_eq "$("$SBX" exec "$id" -- head -c 3000000 /dev/zero 2>"$T/err" | wc -c)" 3000000 "3 MB"
  [ ! -s "$T/err" ] || fail "a note for output that was not cut: $(cat "$T/err")"
  assert_eq "$("$SBX" exec "$id" -- sh -c 'head -c 67108870 /dev/zero; echo done >&2' 2>"$T/err" | wc -c)" \
    67108864 "64 MiB and 6 bytes"
  grep -q "stdout was cut at 67108864 of its 67108870 bytes" "$T/err" || fail "no note: $(cat "$T/err")"
  grep -q "^done$" "$T/err" || fail "stderr: $(cat "$T/err")"
}

# sbx started with stdin, stdout or stderr closed: its own sockets must not become them.
test_closed_std_fds() {
  one_daemon
  local id out rc
  id=$(new_sandbox) || fail "create failed"
  out=$(timeout 20 "$SBX" exec -i "$id" -- cat <&-); rc=$?
  assert_eq "$rc/$out" "0/" "exec -i with stdin closed: an empty stdin"
  timeout 20 "$SBX" exec -i "$id" -- sh -c 'echo hi; exit 3' </dev/null >&-; rc=$?
  assert_eq $rc 3 "exec -i with stdout closed"
  timeout 20 "$SBX" exec "$id" -- sh -c 'echo hi; exit 3' >&-; rc=$?
  assert_eq $rc 3 "exec with stdout closed"
  out=$(timeout 20 "$SBX" exec "$id" -- sh -c 'echo out; echo err >&2; exit 4' 2>&-); rc=$?
  assert_eq "$rc/$out" "4/out" "exec with stderr closed"
}

# Values that are no numbers of their kind are usage errors (exit 2) before any request: inf,
# nan and hex for --cpu/--max-cost, fractions and exponents for sbx grpo's counts, signs for
# --pids, --gpus and ports, a PID out of range. sbx image/volume without a subcommand: the usage
# on stderr (on stdout for --help).
test_usage_errors() {
  set +e
  SBX=$(bin sbx)
  local rc args flag e=$SBX_CASE_DIR/err o=$SBX_CASE_DIR/out
  # FLAG:ARGS, FLAG the word the message must name
  for args in "--cpu:create --cpu inf" "--cpu:create --cpu nan" "--cpu:create --cpu 0x10" \
    "--max-cost:create --max-cost inf" "--max-cost:create --max-cost NaN" "--cpu:run --cpu inf -- true" \
    "--cpu:create --cpu 5x" "--steps:grpo --preview --steps 2.9" "--gpus:grpo --preview --gpus 1.5" \
    "--group-size:grpo --preview --group-size 1e2" "--seed:grpo --preview --seed 18446744073709551616" \
    "--steps:grpo --preview --steps -1" "PID:kill sb-x 99999999999999999999999 TERM" \
    "PID:kill sb-x 2147483648" "--pids:create --pids -18446744073709551615" \
    "--pids:create --pids +5" "--gpus:create --gpus -0" "--gpus:create --gpus +1" \
    "port:port sb-x +80" "port:port sb-x -0"; do
    flag=${args%%:*} args=${args#*:}
    # shellcheck disable=SC2086 # the words are meant to split
    SBX_HOST=/nonexistent.sock "$SBX" $args </dev/null >/dev/null 2>"$e"; rc=$?
    assert_eq "$rc" 2 "sbx $args"
    grep -q -- "$flag" "$e" || fail "sbx $args: the message does not name $flag: $(cat "$e")"
  done
  "$SBX" grpo --preview --steps 3 --gpus 2 --group-size 100 --seed 999999999999999999 >/dev/null ||
    fail "grpo: whole numbers are fine"
  for args in image volume; do
    "$SBX" $args >"$o" 2>"$e"; rc=$?
    assert_eq "$rc/$(wc -c <"$o")" "2/0" "sbx $args: exit 2, nothing on stdout"
    grep -q "^usage: sbx $args" "$e" || fail "sbx $args: no usage on stderr"
    "$SBX" $args --help 2>/dev/null | grep -q "^usage: sbx $args" || fail "sbx $args --help"
  done
}

# sbx cp ID:DIR LOCAL and sbx cp ID:DIR - fetch the directory's tar once, as the daemon's request
# log (debug) counts the GETs of .../files (before: read_file's GET, whose tar was refused as a
# directory's once it had come whole, then get_archive's); a file is one GET too.
test_cp_dir_fetched_once() {
  one_daemon
  local id dst n before log=${DAEMON_DIR[a]}/log
  id=$(new_sandbox) || fail "create failed"
  "$SBX" exec "$id" --sh -- 'mkdir -p /workspace/d/sub && echo hi >/workspace/d/sub/f' ||
    fail "prepare dir"
  gets() { grep -c "request method=GET path=/v1/sandboxes/$id/files status=200 " "$log"; }
  for dst in "$id:/workspace/d|$T/out" "$id:/workspace/d|-" "$id:/workspace/d/sub/f|$T/f"; do
    before=$(gets)
    "$SBX" cp "${dst%%|*}" "${dst#*|}" >"$T/stdout" || fail "sbx cp ${dst/|/ }"
    for _ in $(seq 1 50); do [ "$(gets)" -gt "$before" ] && break; sleep 0.1; done
    sleep 0.3 # a second GET would be logged by now
    n=$(($(gets) - before))
    assert_eq "$n" 1 "sbx cp ${dst/|/ }: GETs of the path"
  done
  assert_eq "$(cat "$T/out/sub/f")/$(cat "$T/f")" "hi/hi" "what was copied"
}

# A flag without its value, an unknown flag, a value for a flag that takes none: exit 2 and one
# line naming the flag, as docker's "flag needs an argument: 'e' in -e" (before, getopt's own
# line and then "unknown option", which named nothing), for every kind of subcommand parser.
test_flag_errors() {
  set +e
  SBX=$(bin sbx)
  local rc args want e=$SBX_CASE_DIR/err
  for args in "exec sb-x -e|flag needs an argument: 'e' in -e" \
    "exec sb-x -ite|flag needs an argument: 'e' in -ite" \
    "exec sb-x --env|flag needs an argument: --env" "ls -l|flag needs an argument: 'l' in -l" \
    "create --memory|flag needs an argument: --memory" "logs --tail|flag needs an argument: --tail" \
    "run --cmd-timeout|flag needs an argument: --cmd-timeout" "rm --host|flag needs an argument: --host" \
    "grpo --tasks|flag needs an argument: --tasks" "--host|flag needs an argument: --host" \
    "exec sb-x --bogus|unknown flag: --bogus" "exec sb-x -x|unknown shorthand flag: 'x'" \
    "rm --bogus=1 sb-x|unknown flag: --bogus" "grpo --bogus|unknown flag: --bogus" \
    "exec sb-x --sh=1|flag takes no argument: --sh"; do
    want=${args#*|} args=${args%%|*}
    # shellcheck disable=SC2086 # the words are meant to split
    SBX_HOST=/nonexistent.sock "$SBX" $args </dev/null >/dev/null 2>"$e"; rc=$?
    assert_eq "$rc" 2 "sbx $args"
    assert_eq "$(wc -l <"$e")" 1 "sbx $args: one line on stderr: $(cat "$e")"
    grep -qF -- "$want" "$e" || fail "sbx $args: wanted \"$want\", got: $(cat "$e")"
  done
}

# sbx volume rm and sbx inspect go on past a name that fails (as sbx rm) and exit 1.
test_rm_inspect_go_on() {
  command -v mkfs.ext4 >/dev/null || skip "mkfs.ext4 is needed (e2fsprogs, tests/deps.sh)"
  [ -e /dev/loop-control ] || skip "loop devices are needed (/dev/loop-control)"
  one_daemon
  local id rc out
  "$SBX" volume create --size 16Mi cli-b >/dev/null || fail "volume create"
  out=$("$SBX" volume rm cli-nope cli-b 2>"$T/err"); rc=$?
  assert_eq "$rc/$out" "1/cli-b" "volume rm: cli-b removed after cli-nope failed"
  grep -q "cli-nope" "$T/err" || fail "volume rm: $(cat "$T/err")"
  "$SBX" volume inspect cli-b >/dev/null 2>&1 && fail "cli-b is still there"
  id=$(new_sandbox) || fail "create failed"
  out=$("$SBX" inspect sb-nope "$id" 2>"$T/err"); rc=$?
  assert_eq $rc 1 "inspect with an unknown id"
  echo "$out" | grep -qE "^id +$id\$" || fail "inspect did not show $id after sb-nope: $out"
  out=$("$SBX" --json inspect sb-nope "$id" 2>/dev/null | json "[s['id'] for s in d]"); rc=${PIPESTATUS[0]}
  assert_eq "$out" "['$id']" "inspect --json: the sandboxes found"
  "$SBX" --json inspect sb-nope >"$T/out" 2>/dev/null; rc=$?
  assert_eq "$rc/$(wc -c <"$T/out")" "1/0" "inspect --json of one unknown id"
}

# sbx create --json whose inspect after the create fails (a stand-in daemon,
# fake_sandboxd.py): exit 1, nothing on stdout, and the sandbox terminated, not left running
# with an id nobody saw.
test_create_json_inspect_fails() {
  setup
  local rc pid log=$T/requests
  python3 "$SBX_SRC_DIR/tests/integration/fake_sandboxd.py" "$T/port" "$log" & pid=$!
  daemon_at_exit kill "$pid"
  for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.05; done
  [ -s "$T/port" ] || fail "fake_sandboxd.py did not start"
  "$SBX" --host "http://127.0.0.1:$(cat "$T/port")" create --json >"$T/out" 2>"$T/err"; rc=$?
  assert_eq "$rc/$(wc -c <"$T/out")" "1/0" "create --json with a failing inspect"
  grep -q "inspect broke" "$T/err" || fail "the inspect's error is not shown: $(cat "$T/err")"
  grep -qx "DELETE /v1/sandboxes/sb-0123456789abcdef0123456789abcdef" "$log" ||
    fail "the sandbox was not terminated: $(cat "$log")"
}

TEST_TIMEOUT_cp=90
TEST_TIMEOUT_cp_dir_fetched_once=60
TEST_TIMEOUT_multi_endpoint=90

source "$(dirname "$0")/../lib/lib.sh" "$@"
