#!/usr/bin/env bash
# The gvisor isolation class through the daemon (core/gvisor.c, shim/gvisor.h): /v1/info names
# runsc and its version, a gvisor create runs under gVisor's kernel with the same user, files
# API, limits, terminals and forks as a native one (running out of memory ends it typed
# oom_killed), a daemon killed with SIGKILL re-adopts it, idle/lifetime/cost limits end it, what
# gVisor cannot do is refused naming it (grading), and a node where runsc cannot run says why and answers 501 isolation_unavailable,
# never a native sandbox instead. The isolation probes of both classes are
# tests/integration/test_shim_isolation.c (ISO_TEST).

DAEMON_TAG=gvisor
source "$(dirname "$0")/../lib/daemon.sh"

need_runsc() { command -v runsc >/dev/null || skip "runsc (gVisor) is not installed: apt-get install runsc"; }
x() { # ID SHELL-COMMAND: run it, BODY is the exec answer
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -n --arg c "$2" '{argv:["sh","-c",$c]}')"
  expect 200
}

TEST_TIMEOUT_unavailable=60
test_unavailable() { # no runsc here: /v1/info says why, a gvisor create is 501 with the reason
  start_daemon --runsc /nonexistent/runsc
  req GET /v1/info
  expect 200 '.isolation.default == "native" and .isolation.classes.native.available and
    (.isolation.classes.gvisor.available | not) and
    (.isolation.classes.gvisor.reason | test("/nonexistent/runsc.*No such file"))'
  req POST /v1/sandboxes -d '{"isolation":"gvisor"}'
  expect 501 '.code == "isolation_unavailable" and (.message | test("gvisor is unavailable on this node: runsc /nonexistent/runsc"))'
  req GET /v1/sandboxes; expect 200 'length == 0' # nothing started in its place
  create '{"isolation":"native"}'
  echo "$BODY" | jq -e '.isolation == "native"' >/dev/null || fail "native: $BODY"
  stop_daemon
  start_daemon --runsc none
  req GET /v1/info
  expect 200 '.isolation.classes.gvisor.reason | test("disabled by the configuration")'
  req POST /v1/sandboxes -d '{"isolation":"gvisor"}'; expect 501 '.code == "isolation_unavailable"'
}

TEST_TIMEOUT_gvisor_sandbox=120
test_gvisor_sandbox() {
  need_runsc
  start_daemon
  req GET /v1/info
  expect 200 '.isolation.classes.gvisor.available and (.isolation.classes.gvisor.version | length > 0)
    and .isolation.classes.gvisor.platform == "ptrace"'
  req POST /v1/sandboxes -d '{"isolation":"bogus"}'; expect 400 '.message | startswith("isolation: must be")'
  req POST /v1/sandboxes -d '{"isolation":"gvisor","profile":"grading"}'
  expect 400 '.message | test("gvisor.*grading")'
  create '{"isolation":"gvisor","disk":"64Mi"}'; local id=$ID
  echo "$BODY" | jq -e '.isolation == "gvisor"' >/dev/null || fail "isolation: $BODY"
  x "$id" 'id -u; uname -r; ls -ld /workspace | cut -d" " -f3'
  echo "$BODY" | jq -e --arg k "$(uname -r)" '.stdout as $o | ($o | startswith("1000\n")) and
    ($o | contains($k) | not) and ($o | endswith("sandbox\n"))' >/dev/null || fail "in gVisor: $BODY"
  # the files API works on the host side of the same files
  req PUT "/v1/sandboxes/$id/files?path=/workspace/h.txt" -H 'Content-Type: application/octet-stream' \
    --data-binary 'from the host'
  expect 204
  x "$id" 'cat /workspace/h.txt; echo made inside > /workspace/g.txt'
  echo "$BODY" | jq -e '.stdout == "from the host"' >/dev/null || fail "host file: $BODY"
  req GET "/v1/sandboxes/$id/files?path=/workspace/g.txt"; expect 200
  [ "$BODY" == "made inside" ] || fail "files GET: $BODY"
  # the disk limit is the host's tmpfs: ENOSPC for the command, the sandbox goes on
  x "$id" 'dd if=/dev/zero of=/tmp/big bs=1M count=100 2>&1 | grep -o "No space left on device"; rm -f /tmp/big; echo alive'
  echo "$BODY" | jq -e '.stdout == "No space left on device\nalive\n"' >/dev/null ||
    fail "disk: $BODY"
  # background processes and their output
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","sleep 0.2; echo bg"],"background":true}'
  expect 201; local pid; pid=$(echo "$BODY" | jq -r .pid)
  req_until 20 '.state == "exited"' GET "/v1/sandboxes/$id/processes/$pid"
  # a timeout kills the command's whole tree, what it double-forked too (gVisor has no
  # subreaper: its orphans go to the runner at once; shim/proctree.h)
  req POST "/v1/sandboxes/$id/exec" \
    -d '{"argv":["sh","-c","(sleep 1001 </dev/null >/dev/null 2>&1 &); exec sleep 1002"],"timeout":"3s"}'
  expect 200 '.reason == "command_timeout"'
  x "$id" 'for p in /proc/[0-9]*; do tr "\0" " " <$p/cmdline; echo; done | grep -c "^sleep 100" || true'
  echo "$BODY" | jq -e '.stdout == "0\n"' >/dev/null || fail "the timed-out command's tree: $BODY"
  # a terminal (gVisor's, relayed to a host one: shim/gvisor_tty.c), background too
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","stty size; test -t 0 && echo tty; exit 4"],"tty":true,"tty_size":{"rows":7,"cols":9}}'
  expect 200 '.exit_code == 4 and .stdout == "7 9\r\ntty\r\n"'
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","stty size"],"tty":true,"background":true}'
  expect 201; pid=$(echo "$BODY" | jq -r .pid)
  req_until 20 '.state == "exited" and .exit_code == 0 and .stdout == "24 80\r\n"' GET "/v1/sandboxes/$id/processes/$pid?tail=100"
  # forks are gvisor sandboxes with the source's files
  req POST "/v1/sandboxes/$id/fork" -d '{"count":2}'
  expect 201 'length == 2 and all(.[]; .isolation == "gvisor" and .state == "running")'
  local f; f=$(echo "$BODY" | jq -r '.[0].id')
  x "$f" 'cat /workspace/g.txt; uname -r'
  echo "$BODY" | jq -e --arg k "$(uname -r)" '(.stdout | startswith("made inside\n")) and (.stdout | contains($k) | not)' \
    >/dev/null || fail "fork: $BODY"
  req DELETE "/v1/sandboxes/$id"; expect 204
}

TEST_TIMEOUT_gvisor_setsid_escapee=120
test_gvisor_setsid_escapee() { # gVisor has no subreaper: a process that left its command's
  # session (setsid) and whose parent then ended is out of the reaper's tree and of every session
  # of the command; the command's cgroup (shim/gvinit/cmd_cgroup.h) still holds it: a timeout, a
  # kill and a signal take it too. What a command that ends on its own leaves is kept (as native)
  need_runsc
  start_daemon
  create '{"isolation":"gvisor"}'; local id=$ID pid n
  # N END: a child leaves the session and double-forks `sleep N`; the command then sleeps (END
  # "sleep") or exits 0 (END "exit")
  local prog='import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", sys.argv[1]])
    os._exit(0)
os.wait()
if sys.argv[2] == "sleep":
    os.execvp("sleep", ["sleep", "900"])'
  # N: "PPID SID" of each live `sleep N`, with the escapee's command's own session ("cmd SID")
  local find='import os, sys
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and open(f"/proc/{p}/cmdline").read() == f"sleep\0{sys.argv[1]}\0":
            s = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            if s[0] != "Z":
                print(s[1], s[3])
    except OSError:
        pass'
  escapee() { # N END [extra exec fields]: start it in the background, until its sleeper has left
    req POST "/v1/sandboxes/$id/exec" -d "$(jq -n --arg p "$prog" --arg n "$1" --arg e "$2" \
      --argjson x "${3:-{\}}" '{argv:["python3","-c",$p,$n,$e],background:true} + $x')"
    expect 201; pid=$(echo "$BODY" | jq -r .pid)
    for _ in $(seq 100); do
      live "$1"
      # the sleeper: init's child (pid 1, the runner), in a session that is not the command's
      [[ "$BODY" =~ ^1\ ([0-9]+)$ && "${BASH_REMATCH[1]}" != "$pid" ]] && return 0
      sleep 0.1
    done
    fail "no escaped sleep $1: $BODY"
  }
  live() { # N -> BODY: the lines of find
    req POST "/v1/sandboxes/$id/exec" -d "$(jq -n --arg f "$find" --arg n "$1" '{argv:["python3","-c",$f,$n]}')"
    expect 200; BODY=$(echo "$BODY" | jq -r .stdout)
  }
  gone() { # N WHAT: no `sleep N` is left (the kill loop is done when the exit is reported)
    live "$1"; [ -z "$BODY" ] || fail "$2: the escaped sleep $1 lives on: $BODY"
  }
  escapee 2001 sleep '{"timeout":"4s"}'
  req_until 20 '.state == "exited" and .reason == "command_timeout"' GET "/v1/sandboxes/$id/processes/$pid"
  gone 2001 "a timeout"
  escapee 2002 sleep
  req DELETE "/v1/sandboxes/$id/processes/$pid"; expect 204
  req_until 20 '.state == "exited" and .signal == 9' GET "/v1/sandboxes/$id/processes/$pid"
  gone 2002 "a kill"
  escapee 2003 sleep
  req POST "/v1/sandboxes/$id/processes/$pid/signal" -d '{"signal":"TERM"}'; expect 204
  req_until 20 '.state == "exited" and .signal == 15' GET "/v1/sandboxes/$id/processes/$pid"
  gone 2003 "a SIGTERM"
  # a synchronous exec's timeout too
  req POST "/v1/sandboxes/$id/exec" -d "$(jq -n --arg p "$prog" '{argv:["python3","-c",$p,"2004","sleep"],timeout:"3s"}')"
  expect 200 '.reason == "command_timeout"'
  gone 2004 "a synchronous exec's timeout"
  # an ordinary end keeps it; so does a later command's kill
  escapee 2005 exit
  req_until 20 '.state == "exited" and .exit_code == 0' GET "/v1/sandboxes/$id/processes/$pid"
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["sleep","900"],"timeout":"1s"}'
  expect 200 '.reason == "command_timeout"'
  live 2005; [[ "$BODY" =~ ^1\ [0-9]+$ ]] || fail "the kept sleep 2005: $BODY"
  req DELETE "/v1/sandboxes/$id"; expect 204
}

TEST_TIMEOUT_gvisor_signal_once=90
test_gvisor_signal_once() { # a signal request reaches each process of the command once: a
  # real-time signal queues, so one sent twice (by the tree's walk and by the command's cgroup,
  # shim/gvinit/cmd_cgroup.h) is received twice. The command and its child each count theirs
  need_runsc
  start_daemon
  create '{"isolation":"gvisor"}'; local id=$ID pid
  local prog='import os, signal, time
signal.pthread_sigmask(signal.SIG_BLOCK, {40})
child = os.fork()
open("/tmp/ready" if child else "/tmp/ready-child", "w").close()
signal.sigtimedwait({40}, 60)
time.sleep(1)
n = 1
while signal.sigtimedwait({40}, 0):
    n += 1
print("child" if child == 0 else "cmd", n, flush=True)
if child:
    os.waitpid(child, 0)'
  req POST "/v1/sandboxes/$id/exec" -d "$(jq -n --arg p "$prog" '{argv:["python3","-c",$p],background:true}')"
  expect 201; pid=$(echo "$BODY" | jq -r .pid)
  for _ in $(seq 100); do
    x "$id" 'test -e /tmp/ready && test -e /tmp/ready-child && echo ready || true'
    [ "$(echo "$BODY" | jq -r .stdout)" == "ready" ] && break
    sleep 0.1
  done
  req POST "/v1/sandboxes/$id/processes/$pid/signal" -d '{"signal":40}'; expect 204
  req_until 20 '.state == "exited"' GET "/v1/sandboxes/$id/processes/$pid?tail=100"
  echo "$BODY" | jq -e '.exit_code == 0 and (.stdout | split("\n") | sort) == ["", "child 1", "cmd 1"]' \
    >/dev/null || fail "one signal request, each process's count: $BODY"
  req DELETE "/v1/sandboxes/$id"; expect 204
}

TEST_TIMEOUT_gvisor_out_of_memory=90
test_gvisor_out_of_memory() { # the limit is what gVisor reports; running out of it ends the
  # whole sandbox (gVisor's own memory is in the cgroup), typed: never infrastructure_failure
  need_runsc
  start_daemon
  create '{"isolation":"gvisor","memory":"128Mi"}'; local id=$ID
  x "$id" 'grep MemTotal /proc/meminfo; free -m | awk "/^Mem:/ {print \$2}"'
  echo "$BODY" | jq -e '.stdout == "MemTotal:         131072 kB\n128\n"' >/dev/null || fail "meminfo: $BODY"
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["python3","-c","import sys\nprint(\"start\", flush=True)\nb = []\nwhile True: b.append(bytearray(1 << 20))"]}'
  expect 200 '.reason == "oom_killed" and .signal == 9 and .stdout == "start\n"' # a result, as native
  req GET "/v1/sandboxes/$id"
  expect 200 '.state == "ended" and .end.reason == "oom_killed" and
    (.end.message | test("ran out of memory.*whole sandbox ends"))'
  [ "$(metric 'sandboxd_sandbox_ends_total{reason="oom_killed"}')" == 1 ] || fail "ends metric"
}

TEST_TIMEOUT_gvisor_daemon_killed_and_timeouts=60
test_gvisor_daemon_killed_and_timeouts() { # a daemon killed with SIGKILL: the new one re-adopts
  # gvisor sandboxes (runsc, its shim and the files live on); idle, lifetime and cost limits end
  # gvisor sandboxes as they end native ones
  need_runsc
  start_daemon
  create '{"isolation":"gvisor","timeout":"10m"}'; local id=$ID
  x "$id" 'echo state > /workspace/mark'
  local shim; shim=$(jq .shim_pid "$D/state/sandboxes/$id.json")
  kill -9 "$DPID"; wait "$DPID" 2>/dev/null || true
  kill -0 "$shim" || fail "the shim did not survive the daemon's SIGKILL"
  start_daemon
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "running" and .isolation == "gvisor"'
  x "$id" 'cat /workspace/mark; uname -r'
  echo "$BODY" | jq -e --arg k "$(uname -r)" '(.stdout | startswith("state\n")) and (.stdout | contains($k) | not)' \
    >/dev/null || fail "after the restart: $BODY"
  create '{"isolation":"gvisor","idle_timeout":"1s"}'; local idle=$ID
  create '{"isolation":"gvisor","timeout":"3s","idle_timeout":"1m"}'; local life=$ID # (past the start)
  # (reached after ~3 s, past a gvisor start: one reached while starting ends the start)
  create '{"isolation":"gvisor","max_cost_usd":0.00003,"cpu":2,"memory":"4Gi"}'; local cost=$ID
  ended() { # ID REASON: the list (a GET of the sandbox itself would be activity)
    req_until 6 "any(.[]; .id == \"$1\" and .state == \"ended\")" GET /v1/sandboxes
    echo "$BODY" | jq -e --arg i "$1" --arg r "$2" '.[] | select(.id == $i) | .end.reason == $r' \
      >/dev/null || fail "$1 did not end $2: $BODY"
  }
  ended "$idle" idle_timeout
  ended "$life" lifetime_exceeded
  ended "$cost" cost_limit
  req GET "/v1/sandboxes/$id"; expect 200 '.state == "running"'
}

TEST_TIMEOUT_gvisor_pool_and_default=120
test_gvisor_pool_and_default() { # a gvisor pool serves gvisor creates only; the config default
  need_runsc
  daemon_dirs
  jq -n '{defaults: {isolation: "gvisor"}}' >"$D/config.json"
  start_daemon --config "$D/config.json" --pool 'size=1,isolation=gvisor,memory=256Mi'
  wait_ready 1 60
  req GET /v1/info; expect 200 '.isolation.default == "gvisor"'
  # its spares park nothing (each gvisor create would free a native start): `sbx-shim spare
  # PAD` with no cgroup, no init, no root
  local sp='' p
  for _ in $(seq 100); do
    for p in $(ps -o pid= --ppid "$DPID"); do
      [ "$(tr '\0' '\n' <"/proc/$p/cmdline" | sed -n 2p)" == spare ] && sp=$p
    done
    [ -n "$sp" ] && break
    sleep 0.05
  done
  [ -n "$sp" ] || fail "no spare shim"
  assert_eq "$(tr '\0' '\n' <"/proc/$sp/cmdline" | wc -l)" 3 "the spare's argv"
  sleep 0.2
  [ -z "$(ps -o pid= --ppid "$sp")" ] || fail "the spare $sp parked an init"
  create '{"memory":"256Mi"}' # the default class, from the pool
  echo "$BODY" | jq -e '.isolation == "gvisor" and .pooled' >/dev/null || fail "pooled: $BODY"
  create '{"memory":"256Mi","isolation":"native"}' # not from the gvisor pool
  echo "$BODY" | jq -e '.isolation == "native" and (.pooled | not)' >/dev/null || fail "native: $BODY"
  x "$ID" 'uname -r'
  echo "$BODY" | jq -e --arg k "$(uname -r)" '.stdout == ($k + "\n")' >/dev/null || fail "native kernel: $BODY"
  create '{"profile":"grading"}' # the operator's default does not apply where gVisor cannot
  echo "$BODY" | jq -e '.isolation == "native"' >/dev/null || fail "grading: $BODY"
  # /run_code in the default class: the code goes with the run (its exec's "file", after env
  # in the runner's message), and the runner still adds its statx preload to the environment
  local code='import os, sys\nprint(open(__file__).read().endswith(\"# end\"), sys.argv, os.environ.get(\"LD_PRELOAD\"), os.uname().release)\n# end'
  req POST /run_code -d "{\"language\":\"python\",\"code\":\"$code\"}"
  expect 200 '.status == "Success"'
  echo "$BODY" | jq -e --arg k "$(uname -r)" '.run_result.stdout as $o |
    ($o | startswith("True [\u0027main.py\u0027] /dev/.sbx-statx.so ")) and ($o | contains($k) | not)' \
    >/dev/null || fail "run_code in gVisor: $BODY"
}

source "$(dirname "$0")/../lib/lib.sh"
