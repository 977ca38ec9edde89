# Helpers of the pause tests (tests/integration/test_pause.sh, tests/network/test_fleet_pause.sh),
# sourced after tests/lib/daemon.sh: a sandbox whose Python process keeps a counter in its memory
# and a background process, and the checks that a resume brought them back. req/expect talk to
# the current daemon instance (daemon_use).

need_criu() {
  command -v criu >/dev/null || skip "criu is needed (tests/deps.sh builds CRIU 4)"
  criu check >/dev/null 2>&1 || skip "criu check fails on this kernel: $(criu check 2>&1 | tail -1)"
}

# The Python process: its counter lives in its memory (x), written to /tmp/count every 50 ms;
# a restarted one would start again at 1000. A background sleep, and a file in /workspace.
STATEFUL='{"argv":["sh","-c","echo kept > /workspace/f; sleep 1000 </dev/null >/dev/null 2>&1 & python3 -c \"import time\nx = 1000\nwhile True:\n    x += 1\n    open(\\\"/tmp/count.new\\\", \\\"w\\\").write(str(x))\n    __import__(\\\"os\\\").rename(\\\"/tmp/count.new\\\", \\\"/tmp/count\\\")\n    time.sleep(0.05)\" </dev/null >/dev/null 2>&1 &"]}'

run_in() { # ID ARGV-JSON -> OUT (stdout)
  req POST "/v1/sandboxes/$1/exec" -d "{\"argv\":$2}"
  expect 200 '.exit_code == 0'
  OUT=$(echo "$BODY" | jq -r .stdout)
}

# The counter now, and the pids of python and sleep in the sandbox.
snapshot() { # ID -> COUNT PIDS
  run_in "$1" '["sh","-c","cat /tmp/count; echo; pgrep -x python3; pgrep -x sleep"]'
  COUNT=$(echo "$OUT" | sed -n 1p)
  PIDS=$(echo "$OUT" | sed -n '2,$p' | tr '\n' ' ')
  [ "$COUNT" -gt 1000 ] 2>/dev/null || fail "no counter: $OUT"
}

stateful_sandbox() { # [extra create fields] -> ID, COUNT, PIDS
  create "{\"pausable\":true${1:+,$1}}"
  req POST "/v1/sandboxes/$ID/exec" -d "$STATEFUL"
  expect 200
  sleep 0.3
  snapshot "$ID"
}

resume() { # ID: POST resume; CRIU's errors when it failed
  req POST "/v1/sandboxes/$1/resume"
  [ "$CODE" == 200 ] || grep -h Error "$D/run/criu-restore-$1.log" 2>/dev/null | grep -v tables >&2
}

# After a resume: the same processes, the counter went on from where it was (its memory came
# back), the file is there.
check_resumed() { # ID COUNT-BEFORE PIDS-BEFORE
  local before=$2 pids=$3
  sleep 0.2
  snapshot "$1"
  [ "$PIDS" == "$pids" ] || fail "other processes after the resume: $PIDS vs $pids"
  [ "$COUNT" -ge "$before" ] || fail "the counter went back: $COUNT after $before (not its memory)"
  run_in "$1" '["cat","/workspace/f"]'
  [ "$OUT" == kept ] || fail "the workspace lost its file: $OUT"
}
