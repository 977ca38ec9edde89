#!/usr/bin/env bash
# sbx's attached processes against a real daemon: `sbx exec -i` streams stdin byte-exact (8 MB,
# 100 MB in the plain pass only, a slow trickle) with the daemon's memory bounded, stdin closed
# early, a command that exits before reading stdin; `sbx exec -it` driven through tmux (a shell
# prompt, `stty size` after a resize, Ctrl-C interrupts `sleep` but not the shell, `exit 3`,
# the local terminal sane afterwards), in both isolation classes; `sbx run -it`; background
# commands: -d, ps, logs, kill, attach; SIGINT/SIGTERM/SIGHUP to `sbx exec -i/-t` reach the
# command; -it with a stdin that is no terminal refused as docker refuses it.

DAEMON_TAG=cli-it
source "$(dirname "$0")/../lib/daemon.sh"

SBX=
T=
ID=

setup() { # [sbx create flags...]
  set +e # every step is checked explicitly
  require_root
  SBX=$(bin sbx)
  [ -x "$SBX" ] || fail "sbx not built"
  daemon_init
  T=$DAEMON_ROOT/files
  mkdir -p "$T"
  daemon_start a --max-sandboxes 4
  export SBX_HOST=${DAEMON_SOCK[a]}
  ID=$("$SBX" create --memory 256Mi --timeout 10m "$@") || fail "create failed"
}

# The ASan+UBSan pass skips the 100 MB transfer (it takes minutes there; 8 MB covers the path).
sanitized() { [[ "$(nm -D "$SBX_BUILD_DIR/sbx-shim" 2>/dev/null)" == *__asan_init* ]]; }

hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

# stdin_exact SIZE_MB: SIZE_MB random bytes through `sbx exec -i`, checked by sha256.
stdin_exact() {
  head -c "$(($1 << 20))" /dev/urandom >"$T/in"
  local want got
  want=$(sha256sum <"$T/in" | cut -d' ' -f1)
  got=$("$SBX" exec -i "$ID" -- sha256sum <"$T/in" 2>"$T/err") || fail "exec -i of $1 MB failed"
  assert_eq "${got%% *}" "$want" "$1 MB of stdin arrive byte-exact"
  [ ! -s "$T/err" ] || fail "sbx wrote to stderr (a sanitizer report?): $(head -c 2000 "$T/err")"
  rm -f "$T/in"
}

test_stdin_8mb() {
  setup
  stdin_exact 8
}

test_stdin_100mb_bounded() {
  setup
  sanitized && { echo "plain pass only: 100 MB under ASan takes minutes (8 MB covers it)"; return 0; }
  local pid=${DAEMON_PID[a]} before after
  before=$(hwm_kb "$pid")
  # a pipe, so sbx cannot know the size: it must stream
  local want got
  want=$(head -c 100M /dev/zero | sha256sum | cut -d' ' -f1)
  got=$(head -c 100M /dev/zero | "$SBX" exec -i "$ID" -- sha256sum) || fail "exec -i of 100 MB failed"
  assert_eq "${got%% *}" "$want" "100 MB of stdin arrive byte-exact"
  after=$(hwm_kb "$pid")
  # flow control: the daemon holds at most ~256 KiB per direction, not the transfer
  [ $((after - before)) -lt $((48 * 1024)) ] ||
    fail "the daemon's peak memory grew by $((after - before)) KiB for a 100 MB stream"
}

test_stdin_trickle() {
  setup
  local got
  got=$(for i in $(seq 1 20); do echo "line $i"; sleep 0.05; done |
    "$SBX" exec -i "$ID" -- sh -c 'n=0; while read -r l; do n=$((n+1)); echo "$n:$l"; done')
  assert_eq "$(echo "$got" | wc -l)" 20 "every trickled line arrives"
  assert_eq "$(echo "$got" | tail -n1)" "20:line 20" "in order"
}

test_stdin_closed_early() {
  setup
  local got rc
  got=$(printf abc | "$SBX" exec -i "$ID" -- sh -c 'cat; echo; echo after-eof; exit 4'); rc=$?
  assert_eq "$rc" 4 "exit code after stdin closed"
  assert_eq "$got" $'abc\nafter-eof' "the command saw end of input and went on"
  # --json: the streamed output collected into the result object
  got=$(printf abc | "$SBX" --json exec -i "$ID" -- sh -c 'cat; echo e >&2; exit 2'); rc=$?
  assert_eq "$rc" 2 "--json -i passes the exit code through"
  assert_eq "$(echo "$got" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["stdout"], d["stderr"].strip(), d["exit_code"], d["reason"])')" \
    "abc e 2 exited" "--json -i result"
  # with no -i data at all (empty stdin)
  got=$("$SBX" exec -i "$ID" -- wc -c </dev/null) || fail "empty stdin"
  assert_eq "${got// /}" 0 "empty stdin is an immediate EOF"
}

test_exits_before_reading() {
  setup
  local rc
  # an endless producer: sbx must finish when the command does, not when stdin ends
  timeout 30 bash -c "yes | '$SBX' exec -i '$ID' -- sh -c 'exit 7'"; rc=$?
  assert_eq "$rc" 7 "the command's exit code, stdin never read"
  timeout 30 bash -c "head -c 50M /dev/zero | '$SBX' exec -i '$ID' -- true"; rc=$?
  assert_eq "$rc" 0 "a command that ignores stdin"
}

# Over TCP the upgrade carries the bearer token (the daemon authenticates it as every request).
test_tcp_token() {
  setup
  local port=$(free_port) rc out
  daemon_start t --max-sandboxes 2 --tcp "127.0.0.1:$port" --token "tok-$$"
  local url="http://127.0.0.1:$port"
  out=$(SBX_TOKEN="tok-$$" "$SBX" --host "$url" create --memory 128Mi) || fail "create over TCP"
  local tid=$out
  out=$(printf 'over tcp' | SBX_TOKEN="tok-$$" "$SBX" --host "$url" exec -i "$tid" -- cat) ||
    fail "exec -i over TCP"
  assert_eq "$out" "over tcp" "stdin over a TCP WebSocket"
  printf x | SBX_TOKEN=wrong "$SBX" --host "$url" exec -i "$tid" -- cat 2>"$T/err"; rc=$?
  assert_eq "$rc" 1 "a wrong token is refused"
  grep -qi "unauthorized\|token\|401" "$T/err" || fail "message: $(cat "$T/err")"
}

# ---- terminals through tmux ----
TM=
tm() { tmux -S "$TM" "$@"; }
# wait_pane REGEX: until the pane shows REGEX (20 s)
wait_pane() {
  for _ in $(seq 1 200); do
    tm capture-pane -p -t t | grep -Eq "$1" && return 0
    sleep 0.1
  done
  tm capture-pane -p -t t >&2
  fail "the pane never showed /$1/"
}

# sleeping [TRIES]: a `sleep` runs in the sandbox (polled every 0.1 s, 100 tries by default)
sleeping() {
  local q='for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = sleep ] && exit 0; done; exit 1'
  for _ in $(seq 1 "${1:-100}"); do
    "$SBX" exec "$ID" -- sh -c "$q" && return 0
    sleep 0.1
  done
  return 1
}

# with_tmux [sbx create flags...]: setup, and a tmux server of the case's own on $TM (ended
# with the daemon)
with_tmux() {
  setup "$@"
  command -v tmux >/dev/null || skip "tmux is not installed (tests/deps.sh installs it)"
  TM=$DAEMON_ROOT/tmux.sock
  daemon_at_exit tmux -S "$TM" kill-server
}

# tm_start: $T/run.sh in a new 80x24 session "t"; pane_stty: its terminal's settings
tm_start() {
  tm -f /dev/null new-session -d -s t -x 80 -y 24 "bash --norc '$T/run.sh'" || fail "tmux failed"
}
pane_stty() { stty -F "$(tm display-message -p -t t '#{pane_tty}')" -a; }

tty_through_tmux() { # [sbx create flags...]
  with_tmux "$@"
  cat >"$T/run.sh" <<EOS
stty -a | sed 's/rows [0-9]*; columns [0-9]*;//' >'$T/before' # the size changes on purpose
SBX_HOST='$SBX_HOST' '$SBX' exec -it '$ID' -- /bin/sh
echo \$? >'$T/rc'
stty -a | sed 's/rows [0-9]*; columns [0-9]*;//' >'$T/after'
echo DONE
sleep 300
EOS
  tm_start
  wait_pane '^[$#] ?$' # the shell's prompt (capture-pane drops trailing blanks)
  tm send-keys -t t 'echo hi-$((40+2))' Enter
  wait_pane '^hi-42'
  tm send-keys -t t 'stty size' Enter
  wait_pane '^24 80'
  tm resize-window -t t -x 100 -y 30
  sleep 0.5
  tm send-keys -t t 'clear; stty size' Enter
  wait_pane '^30 100'
  tm send-keys -t t 'sleep 30; echo slept' Enter
  sleeping || fail "the shell never started sleep 30"
  tm send-keys -t t C-c
  wait_pane '^[$#] ?$' # the shell's next prompt (the screen was cleared: no earlier bare one)
  ! sleeping 1 || fail "Ctrl-C did not interrupt the sleep"
  tm send-keys -t t 'echo alive-$((1+1))' Enter
  wait_pane '^alive-2'
  tm send-keys -t t 'exit 3' Enter
  wait_pane '^DONE'
  assert_eq "$(cat "$T/rc")" 3 "exit 3 gives exit code 3"
  cmp -s "$T/before" "$T/after" || fail "the local terminal changed: $(diff "$T/before" "$T/after")"
}

test_tty_through_tmux() { tty_through_tmux; }

# -t without -i: a terminal that follows the local window (it did only with -i); no raw mode.
test_tty_without_stdin_follows_the_window() {
  with_tmux
  cat >"$T/run.sh" <<EOS
SBX_HOST='$SBX_HOST' '$SBX' exec -t '$ID' -- sh -c 'stty size; while [ ! -e /tmp/go ]; do sleep 0.1; done; stty size; echo END'
echo \$? >'$T/rc'
sleep 300
EOS
  tm_start
  wait_pane '^24 80'
  pane_stty | grep -q -- ' icanon' ||
    fail "sbx exec -t without -i put the terminal in raw mode"
  tm resize-window -t t -x 100 -y 30
  sleep 0.5
  "$SBX" exec "$ID" -- touch /tmp/go >/dev/null || fail "touch failed"
  wait_pane '^END'
  tm capture-pane -p -t t | grep -q '^30 100' || fail "the size did not follow: $(tm capture-pane -p -t t)"
  for _ in $(seq 1 50); do [ -s "$T/rc" ] && break; sleep 0.1; done
  assert_eq "$(cat "$T/rc")" 0 "exit code"
}

# sbx run -it: a throwaway sandbox with a terminal (docker run -it --rm): the shell's prompt,
# the window's size, exit 3 passed through, the local terminal sane and the sandbox removed.
test_run_tty() {
  with_tmux
  cat >"$T/run.sh" <<EOS
stty -a >'$T/before'
SBX_HOST='$SBX_HOST' '$SBX' run --memory 128Mi --label cli=run-it -it -- /bin/sh
echo \$? >'$T/rc'
stty -a >'$T/after'
echo DONE
sleep 300
EOS
  tm_start
  wait_pane '^[$#] ?$'
  pane_stty | grep -q -- '-icanon' || fail "sbx run -it did not put the terminal in raw mode"
  tm send-keys -t t 'tty; stty size' Enter
  wait_pane '^24 80'
  tm capture-pane -p -t t | grep -q '^/dev/pts/' || fail "no terminal: $(tm capture-pane -p -t t)"
  tm send-keys -t t 'exit 3' Enter
  wait_pane '^DONE'
  assert_eq "$(cat "$T/rc")" 3 "sbx run -it passes exit 3 through"
  cmp -s "$T/before" "$T/after" || fail "the local terminal changed: $(diff "$T/before" "$T/after")"
  assert_eq "$("$SBX" ls --json --label cli=run-it | json "[s['state'] for s in d]")" "['ended']" \
    "sbx run -it removed its sandbox"
}

# The same under gVisor: its terminal is relayed to a host one (shim/gvisor_tty.c).
test_gvisor_tty_through_tmux() {
  command -v runsc >/dev/null || skip "runsc (gVisor) is not installed: apt-get install runsc"
  tty_through_tmux --isolation gvisor
}

# The terminal comes back when sbx is killed mid-session (SIGTERM from outside).
test_tty_restored_on_signal() {
  with_tmux
  cat >"$T/run.sh" <<EOS
stty -a >'$T/before'
bash -c 'echo \$\$ >"$T/pid"; exec env SBX_HOST="$SBX_HOST" "$SBX" exec -it "$ID" -- /bin/sh'
echo \$? >'$T/rc'
stty -a >'$T/after'
echo DONE
sleep 300
EOS
  tm_start
  wait_pane '^[$#] ?$'
  pane_stty | grep -q -- '-icanon' ||
    fail "sbx exec -it did not put the terminal in raw mode"
  kill -TERM "$(cat "$T/pid")"
  wait_pane '^DONE'
  assert_eq "$(cat "$T/rc")" 143 "sbx died of SIGTERM"
  cmp -s "$T/before" "$T/after" || fail "the terminal stayed changed: $(diff "$T/before" "$T/after")"
}

# ---- background commands ----
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

# proc_field PID EXPR: EXPR over the process object
proc_field() { "$SBX" --json ps "$ID" | json "[p for p in d['processes'] if p['pid']==$1][0]$2"; }

wait_state() { # PID STATE
  for _ in $(seq 1 100); do
    [ "$(proc_field "$1" "['state']")" == "$2" ] && return 0
    sleep 0.1
  done
  fail "process $1 never reached state $2"
}

test_background() {
  setup
  local pid out rc
  pid=$("$SBX" exec -d "$ID" -- sh -c 'echo started; echo oops >&2; sleep 300') || fail "exec -d"
  [[ "$pid" =~ ^[0-9]+$ ]] || fail "exec -d printed '$pid'"
  "$SBX" ps "$ID" | grep -E "^$pid +running" >/dev/null || fail "ps does not show $pid running"
  for _ in $(seq 1 50); do
    out=$("$SBX" logs "$ID" "$pid" 2>"$T/err")
    [ "$out" == started ] && break
    sleep 0.1
  done
  assert_eq "$out" started "logs: stdout"
  assert_eq "$(cat "$T/err")" oops "logs: stderr to stderr"
  "$SBX" kill "$ID" "$pid" TERM || fail "kill TERM"
  wait_state "$pid" exited
  assert_eq "$(proc_field "$pid" "['signal']")" 15 "ended by SIGTERM"
  "$SBX" kill "$ID" "$pid" TERM 2>"$T/err"; rc=$?
  assert_eq "$rc" 1 "signalling an ended process fails"
  grep -qi "ended" "$T/err" || fail "no clear message: $(cat "$T/err")"
  "$SBX" kill "$ID" "$pid" NOSUCH 2>/dev/null && fail "an unknown signal must fail"
  # kill without a signal: the whole tree, SIGKILL
  pid=$("$SBX" exec -d "$ID" -- sh -c 'sleep 300 & sleep 300') || fail "exec -d"
  "$SBX" kill "$ID" "$pid" || fail "kill"
  wait_state "$pid" exited
  assert_eq "$(proc_field "$pid" "['signal']")" 9 "DELETE kills with SIGKILL"
}

test_attach() {
  setup
  local pid out rc
  pid=$("$SBX" exec -d "$ID" -- sh -c 'echo early; while read -r l; do echo "got:$l"; done; echo bye; exit 5') ||
    fail "exec -d"
  sleep 0.3
  out=$(printf 'x\ny\n' | "$SBX" attach --replay "$ID" "$pid" 2>"$T/err"); rc=$?
  [ ! -s "$T/err" ] || fail "sbx attach wrote to stderr: $(head -c 2000 "$T/err")"
  assert_eq "$rc" 5 "attach exits with the command's status"
  assert_eq "$out" $'early\ngot:x\ngot:y\nbye' "replayed tail, then the live output"
  "$SBX" attach "$ID" "$pid" </dev/null 2>"$T/err"; rc=$?
  assert_eq "$rc" 1 "attach to an ended process fails"
  grep -qi "ended" "$T/err" || fail "no clear message: $(cat "$T/err")"
  "$SBX" attach "$ID" 999999 </dev/null 2>/dev/null && fail "attach to an unknown pid must fail"
  return 0
}

# SIGINT (Ctrl-C where stdin is no terminal: no raw mode), SIGTERM or SIGHUP to `sbx exec -i/-t`
# (-it wants a terminal for stdin: test_it_without_a_terminal)
# goes to the command, and sbx exits with the command's status once it ended (sbx died alone,
# and the command went on in the sandbox). `env --default-signal=INT` undoes the SIGINT that bash
# ignores for background jobs.
test_signals_reach_the_command() {
  setup
  local each flag sig want pid rc remote= n=0
  for each in "-i:INT:2" "-t:INT:2" "-i:TERM:15" "-t:HUP:1"; do
    IFS=: read -r flag sig want <<<"$each"
    n=$((n + 1))
    env --default-signal=INT "$SBX" exec "$flag" "$ID" -- sleep "30$n" </dev/null >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
      remote=$("$SBX" --json ps "$ID" |
        json "''.join(str(p['pid']) for p in d['processes'] if p['argv'] == ['sleep', '30$n'])")
      [ -n "$remote" ] && break
      sleep 0.1
    done
    [ -n "$remote" ] || fail "sbx exec $flag: the command never showed in ps"
    kill "-$sig" "$pid"
    wait "$pid"; rc=$?
    wait_state "$remote" exited
    assert_eq "$(proc_field "$remote" "['signal']")/$rc" "$want/$((128 + want))" \
      "sbx exec $flag: SIG$sig ended the command and sbx exited with its status"
  done
}

# -i with -t and a stdin that is no terminal (a pipe, /dev/null): "the input device is not a TTY",
# exit 1, nothing started in the sandbox, as docker exec/run -it (before, a remote terminal was
# started and fed the pipe). -t alone and -i alone still run there, as docker's.
test_it_without_a_terminal() {
  setup
  local args rc
  for args in "exec -it $ID" "exec -i -t $ID" "run --memory 128Mi --label cli=it-no-tty -ti"; do
    # shellcheck disable=SC2086 # the words are meant to split
    echo 'echo MADE >/tmp/it-no-tty' | "$SBX" $args -- sh >"$T/out" 2>"$T/err"; rc=$?
    assert_eq "$rc/$(cat "$T/err")/$(cat "$T/out")" "1/sbx: the input device is not a TTY/" \
      "sbx $args with a pipe for stdin"
  done
  "$SBX" exec "$ID" -- test ! -e /tmp/it-no-tty || fail "sbx exec -it ran the command anyway"
  assert_eq "$("$SBX" ls --json --label cli=it-no-tty | json "len(d)")" 0 "sbx run -ti made no sandbox"
  assert_eq "$(echo hi | "$SBX" exec -i "$ID" -- cat)" "hi" "-i alone with a pipe"
  assert_eq "$("$SBX" exec -t "$ID" -- echo hi </dev/null | tr -d '\r')" "hi" "-t alone with /dev/null"
}

# Usage errors exit 2 before any request (no daemon needed).
test_usage_errors() {
  set +e
  SBX=$(bin sbx)
  local rc
  for args in "kill sb-x" "kill sb-x 0" "logs sb-x abc" "attach sb-x" "ps" "exec -d -i sb-x -- cat" \
    "logs --tail 0 sb-x 1"; do
    # shellcheck disable=SC2086 # the words are meant to split
    SBX_HOST=/nonexistent.sock "$SBX" $args </dev/null 2>/dev/null; rc=$?
    assert_eq "$rc" 2 "sbx $args"
  done
}

TEST_TIMEOUT_stdin_100mb_bounded=180
TEST_TIMEOUT_tty_through_tmux=90
TEST_TIMEOUT_gvisor_tty_through_tmux=90
TEST_TIMEOUT_tty_restored_on_signal=60
TEST_TIMEOUT_background=90
source "$(dirname "$0")/../lib/lib.sh" "$@"
