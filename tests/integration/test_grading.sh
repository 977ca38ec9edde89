#!/usr/bin/env bash
# Integration tests of grading sandboxes (docs/GRPO.md "Grading sandboxes"): the grader user
# (uid 1001) and the agent (1000), /grader, the empty HOMEs, sbx-as-agent and its agent socket,
# the grading seccomp profile. Agent code started by the grader through sbx-as-agent tries to
# read the hidden files, kill, trace, write into or see the grader, and to reach the socket.

DAEMON_TAG=grading
source "$(dirname "$0")/../lib/daemon.sh"

ex() { # ID USER SCRIPT: run sh -c SCRIPT as USER (agent|grader); 200 wanted; BODY is the result
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -nc --arg u "$2" --arg s "$3" '{argv:["sh","-c",$s],user:$u}')"
  expect 200
}
out() { echo "$BODY" | jq -r .stdout; }
code() { echo "$BODY" | jq -r .exit_code; }
put() { # ID PATH DATA
  req PUT "/v1/sandboxes/$1/files?path=$2" -H "Content-Type: application/octet-stream" --data-binary "$3"
  expect 204
}
grading() { create '{"profile":"grading","memory":"256Mi","pids":64}'; }

test_profile_and_users() {
  start_daemon
  req POST /v1/sandboxes -d '{"profile":"judge"}'
  expect 400 '.message | test("profile")'
  create '{"memory":"128Mi"}'
  local plain=$ID
  req POST "/v1/sandboxes/$plain/exec" -d '{"argv":["id"],"user":"grader"}'
  expect 400 '.message | test("grading")'
  req POST "/v1/sandboxes/$plain/exec" -d '{"argv":["id"],"user":"root"}'
  expect 400 '.message | test("user")'
  grading
  ex "$ID" agent 'id -u; id -G; echo $HOME; echo $PYTHONNOUSERSITE; ls -A $HOME | wc -l'
  assert_eq "$(out)" "$(printf '1000\n1000\n/home/agent\n1\n0')" "the agent's identity"
  ex "$ID" grader 'id -un; id -G; echo $HOME; echo $PYTHONNOUSERSITE; echo $PATH; ls -A $HOME | wc -l'
  assert_eq "$(out)" "$(printf 'grader\n1001\n/home/grader\n1\n/.sbx/bin:/usr/local/bin:/usr/bin:/bin\n0')" \
    "the grader's identity"
  # HOME and PYTHONNOUSERSITE are the sandbox's, whatever the request says
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","echo $HOME $PYTHONNOUSERSITE"],"env":{"HOME":"/workspace","PYTHONNOUSERSITE":""}}'
  expect 200 '.stdout == "/home/agent 1\n"'
  ex "$ID" grader 'stat -c "%U %a" /grader /home/grader /home/agent /.sbx/run'
  assert_eq "$(out)" "$(printf 'grader 700\ngrader 700\nsandbox 700\ngrader 700')" "owners and modes"
  # the grader's exit status is the exec's (started from argv: no shell of the runner's above)
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["/bin/sh","-c","exit 7"],"user":"grader"}'
  expect 200 '.exit_code == 7 and .reason == "exited"'
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["/bin/sh","-c","kill -SEGV $$"],"user":"grader"}'
  expect 200 '.signal == 11'
  # forked reapers (both users, the helper's) start commands with every signal at its default
  local sigs='cat /proc/self/status | grep -E "^Sig(Blk|Ign|Cgt)" | tr -d "\t"' dfl
  dfl=$(printf 'SigBlk:0000000000000000\nSigIgn:0000000000000000\nSigCgt:0000000000000000')
  ex "$ID" agent "$sigs"
  assert_eq "$(out)" "$dfl" "the agent's command: signals at their defaults"
  ex "$ID" grader "$sigs; sbx-as-agent -- sh -c '$sigs'"
  assert_eq "$(out)" "$(printf '%s\n%s' "$dfl" "$dfl")" "the grader's and its helper's: the same"
}

test_hidden_files() {
  start_daemon
  grading
  put "$ID" /grader/t/secret.txt "SECRET-41"
  put "$ID" /grader/in.txt "hidden input"
  ex "$ID" grader 'stat -c "%u %a" /grader/t /grader/t/secret.txt; cat /grader/t/secret.txt'
  assert_eq "$(out)" "$(printf '1001 755\n1001 644\nSECRET-41')" "the files API writes /grader as the grader"
  ex "$ID" agent 'cat /grader/t/secret.txt; ls /grader; echo rc=$?'
  assert_eq "$(out)" "rc=2" "the agent lists nothing in /grader"
  ex "$ID" grader 'sbx-as-agent -- sh -c "cat /grader/t/secret.txt /grader/in.txt; ls /grader; echo agent-rc=\$?"
                   sbx-as-agent --stdin /grader/in.txt -- cat'
  assert_eq "$(out)" "$(printf 'agent-rc=2\nhidden input')" \
    "agent code reads hidden input only on its stdin"
  echo "$BODY" | jq -e '.stderr | test("Permission denied")' >/dev/null || fail "no denial: $BODY"
  # the files API reads /grader too (the runner's business, not the agent's)
  req GET "/v1/sandboxes/$ID/files?path=/grader/t/secret.txt"
  expect 200
  assert_eq "$BODY" "SECRET-41" "GET of a grader file"
}

# A tar put at / (above /grader) gives each entry the owner of its own path: grader/... the
# grader's, the rest the agent's; a "grader/" entry of mode 0755 leaves /grader 0700.
test_tar_at_root_owners() {
  start_daemon
  grading
  python3 -c 'import io,sys,tarfile
t=tarfile.open(sys.argv[1],"w")
def add(n, d=b"x"):
    i=tarfile.TarInfo(n); i.size=len(d); t.addfile(i,io.BytesIO(d))
i=tarfile.TarInfo("grader"); i.type=tarfile.DIRTYPE; i.mode=0o755; t.addfile(i)
add("grader/t2/hidden.txt", b"H"); add("workspace/w/seen.txt", b"W"); add("./grader/top.txt")
t.close()' "$D/root.tar"
  req PUT "/v1/sandboxes/$ID/files?path=/" -H 'Content-Type: application/x-tar' --data-binary @"$D/root.tar"
  expect 204
  ex "$ID" grader 'stat -c "%n %u" /grader/t2 /grader/t2/hidden.txt /grader/top.txt /workspace/w /workspace/w/seen.txt; stat -c "%n %u %a" /grader'
  assert_eq "$(out)" "$(printf '/grader/t2 1001\n/grader/t2/hidden.txt 1001\n/grader/top.txt 1001\n/workspace/w 1000\n/workspace/w/seen.txt 1000\n/grader 1001 700')" \
    "owners of a tar put at / (and /grader keeps its mode)"
  ex "$ID" agent 'cat /grader/t2/hidden.txt; echo rc=$?'
  assert_eq "$(out)" "rc=1" "the agent cannot read what the tar put under /grader"
}

# The agent's program gets the grader's pid and tries everything against it.
ATTACK='import ctypes, os, sys
gp = int(sys.argv[1]); libc = ctypes.CDLL(None, use_errno=True)
def res(name, rc):
    print(name, "ok" if rc >= 0 else os.strerror(ctypes.get_errno()))
res("ptrace", libc.ptrace(16, gp, None, None))                # PTRACE_ATTACH
class iov(ctypes.Structure): _fields_ = [("b", ctypes.c_void_p), ("n", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8); l = iov(ctypes.addressof(buf), 8); r = iov(0x400000, 8)
libc.process_vm_writev.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
libc.process_vm_readv.argtypes = libc.process_vm_writev.argtypes
res("process_vm_writev", libc.process_vm_writev(gp, ctypes.byref(l), 1, ctypes.byref(r), 1, 0))
res("process_vm_readv", libc.process_vm_readv(gp, ctypes.byref(l), 1, ctypes.byref(r), 1, 0))
for sig in (9, 19, 15):
    try: os.kill(gp, sig); print("kill", sig, "ok")
    except OSError as e: print("kill", sig, e.strerror)
try: open(f"/proc/{gp}/mem", "rb"); print("mem ok")
except OSError as e: print("mem", e.strerror)
print("proc-visible", os.path.exists(f"/proc/{gp}"),
      sum(1 for p in os.listdir("/proc") if p.isdigit() and os.stat(f"/proc/{p}").st_uid == 1001))
for p in ("/home/grader/x", "/grader/x", "/.sbx/run/x", "/.sbx/bin/x"):
    try: open(p, "w"); print("write", p, "ok")
    except OSError as e: print("write", p, e.strerror)
'

TEST_TIMEOUT_agent_cannot_reach_grader=60
test_agent_cannot_reach_grader() {
  start_daemon
  grading
  put "$ID" /grader/attack.py "$ATTACK"
  ex "$ID" grader 'cp /grader/attack.py /tmp/attack.py && chmod 644 /tmp/attack.py
    sbx-as-agent --timeout 30 -- python3 /tmp/attack.py $$; echo helper=$?; echo ALIVE'
  echo "$BODY" | jq -r .stdout >&2
  local want
  want=$(cat <<'EOF'
ptrace Operation not permitted
process_vm_writev Operation not permitted
process_vm_readv Operation not permitted
kill 9 Operation not permitted
kill 19 Operation not permitted
kill 15 Operation not permitted
mem No such file or directory
proc-visible False 0
write /home/grader/x Permission denied
write /grader/x Permission denied
write /.sbx/run/x Permission denied
write /.sbx/bin/x Read-only file system
helper=0
ALIVE
EOF
)
  assert_eq "$(out)" "$want" "what agent code could do to the grader"
  assert_eq "$(code)" 0 "the grader's own exit"
}

# ptrace is refused by the grading profile even where the uid would allow it: a process
# tracing its own child. An ordinary sandbox allows it (the default profile).
TRACE='import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
pid = os.fork()
if pid == 0:
    time.sleep(30); os._exit(0)
rc = libc.ptrace(16, pid, None, None)
print("ptrace-child", "ok" if rc == 0 else os.strerror(ctypes.get_errno()))
os.kill(pid, 9); os.waitpid(pid, 0)'
test_seccomp_grading_profile() {
  start_daemon
  grading
  ex "$ID" agent "python3 -c '$TRACE'"
  assert_eq "$(out)" "ptrace-child Operation not permitted" "grading profile: no ptrace"
  ex "$ID" grader "python3 -c '$TRACE'"
  assert_eq "$(out)" "ptrace-child Operation not permitted" "grading profile for the grader"
  create '{"memory":"128Mi"}'
  ex "$ID" agent "python3 -c '$TRACE'"
  assert_eq "$(out)" "ptrace-child ok" "the default profile allows it"
}

test_agent_socket_refused() {
  start_daemon
  grading
  ex "$ID" agent '/.sbx/bin/sbx-as-agent -- id; echo rc=$?; ls /.sbx/run; echo ls=$?
    python3 -c "import socket; s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET); s.connect(\"/.sbx/run/agent.sock\")" 2>&1 | tail -1'
  assert_eq "$(out)" "$(printf 'rc=125\nls=2\nPermissionError: [Errno 13] Permission denied')" \
    "the agent cannot reach the shim's agent socket"
  echo "$BODY" | jq -e '.stderr | test("cannot reach the shim")' >/dev/null || fail "helper message: $BODY"
}

test_helper_exit_codes() {
  start_daemon
  grading
  ex "$ID" grader 'cd /home/grader
    sbx-as-agent -- sh -c "echo out; echo err >&2; exit 3"; echo "rc=$?"
    sbx-as-agent -- sh -c "kill -TERM \$\$"; echo "rc=$?"
    sbx-as-agent --timeout 1 --result r.json -- sleep 60; echo "rc=$?"; cat r.json; echo
    sbx-as-agent -- /nonexistent 2>/dev/null; echo "rc=$?"
    sbx-as-agent --bogus 1 -- id 2>/dev/null; echo "rc=$?"
    sbx-as-agent --cwd /tmp -- pwd; echo "rc=$?"
    sbx-as-agent --result r2.json -- sh -c "printf 12345; printf ab >&2"; echo " rc=$?"; cat r2.json'
  local want
  want=$(cat <<'EOF'
out
rc=3
rc=143
rc=124
{"exit_code":137,"signal":9,"reason":"command_timeout","stdout_bytes":0,"stderr_bytes":0,"truncated":false}
rc=125
rc=125
/tmp
rc=0
12345 rc=0
{"exit_code":0,"signal":0,"reason":"exited","stdout_bytes":5,"stderr_bytes":2,"truncated":false}
EOF
)
  assert_eq "$(out)" "$want" "sbx-as-agent exit statuses and result records"
  echo "$BODY" | jq -e '.stderr == "err\nab"' >/dev/null || fail "stderr relayed: $BODY"
}

test_helper_output_bound() {
  start_daemon
  grading
  ex "$ID" grader 'cd /home/grader
    sbx-as-agent --max-output 1000 --result r.json -- yes > y.txt; echo "rc=$?"
    wc -c < y.txt; jq -c "[.reason, .truncated, .stdout_bytes > 1000]" r.json 2>/dev/null ||
      python3 -c "import json; r = json.load(open(\"r.json\")); print(json.dumps([r[\"reason\"], r[\"truncated\"], r[\"stdout_bytes\"] > 1000]).replace(\" \", \"\"))"'
  assert_eq "$(out)" "$(printf 'rc=137\n1000\n["output_limit",true,true]')" "output bound"
}

TEST_TIMEOUT_helper_background_children=60
test_helper_background_children() {
  start_daemon
  grading
  # a child that keeps the pipes: the helper returns with the program, the child is killed
  ex "$ID" grader 'sbx-as-agent --timeout 30 -- sh -c "sleep 300 & setsid sleep 301 & echo started"; echo "rc=$?"'
  assert_eq "$(out)" "$(printf 'started\nrc=0')" "the helper did not wait for the children"
  ex "$ID" agent 'for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr "\0" " "; echo; done | grep -c "^sleep 30[01]" || true'
  assert_eq "$(out)" 0 "what the program left running was killed"
  # the helper killed while its program runs: the shim kills the program
  ex "$ID" grader 'sbx-as-agent --timeout 0 -- sh -c "touch /tmp/started; exec sleep 302" & h=$!
    while [ ! -e /tmp/started ]; do sleep 0.1; done; kill -9 $h; wait $h; echo "helper=$?"'
  assert_eq "$(out)" "helper=137" "the helper was killed"
  local left=1
  for _ in $(seq 100); do
    ex "$ID" agent 'for p in /proc/[0-9]*; do cat $p/cmdline 2>/dev/null | tr "\0" " "; echo; done | grep -c "^sleep 302" || true'
    left=$(out); [ "$left" == 0 ] && break
    sleep 0.1
  done
  assert_eq "$left" 0 "the program of a dead helper was killed"
}

test_no_workspace_startup_files() {
  start_daemon
  grading
  # user-site .pth files where an agent can put them: the workspace (HOME elsewhere) and its
  # own HOME; neither the grader's python nor the agent's reads them
  ex "$ID" agent 'for h in /workspace /home/agent; do
      d=$h/.local/lib/$(python3 -c "import sys; print(f\"python{sys.version_info[0]}.{sys.version_info[1]}\"")/site-packages
      mkdir -p $d && echo "import os; open(\"/tmp/pwned-\" + str(os.getuid()), \"w\")" > $d/evil.pth
    done; HOME=/workspace python3 -c "import site; print(site.ENABLE_USER_SITE)"'
  assert_eq "$(out)" "False" "PYTHONNOUSERSITE is set for the agent"
  ex "$ID" grader 'python3 -c pass; sbx-as-agent -- python3 -c pass; ls /tmp'
  assert_eq "$(out)" "" "no startup file ran"
}

# The CLI: sbx create --profile grading, sbx exec --user grader (its exit status is the command's).
test_cli_profile_and_user() {
  start_daemon
  local sbx; sbx=$(bin sbx)
  local id; id=$(SBX_HOST=$SOCK "$sbx" create --profile grading --memory 128Mi) || fail "sbx create"
  local o rc=0
  o=$(SBX_HOST=$SOCK "$sbx" exec --user grader "$id" -- sh -c 'id -u; sbx-as-agent -- id -u; exit 5') || rc=$?
  assert_eq "$o" "$(printf '1001\n1000')" "sbx exec --user grader"
  assert_eq "$rc" 5 "sbx exec's exit status"
  SBX_HOST=$SOCK "$sbx" create --profile judge >/dev/null 2>&1 && fail "a bad profile was accepted"
  true
}

# A warm pool of default sandboxes of the same shape never serves a grading create.
TEST_TIMEOUT_pool_keeps_profiles_apart=60
test_pool_keeps_profiles_apart() {
  start_daemon --pool 'size=1,cpu=0.5,memory=256Mi'
  wait_ready 1 20
  req POST /v1/sandboxes -d '{"cpu":0.5,"memory":"256Mi","profile":"grading"}'
  expect 201 '.pooled == false'
  ID=$(echo "$BODY" | jq -r .id)
  ex "$ID" grader 'id -u'
  assert_eq "$(out)" 1001 "a grading sandbox"
  req POST /v1/sandboxes -d '{"cpu":0.5,"memory":"256Mi"}'
  expect 201 '.pooled == true'
}

source "$(dirname "$0")/../lib/lib.sh"
