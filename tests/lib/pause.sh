# Helpers of the pause tests (tests/integration/test_pause.sh, tests/network/test_fleet_pause.sh),
# sourced after tests/lib/daemon.sh: a sandbox whose Python process keeps a counter in its memory
# and a background process, one of a store image whose shell does, and the checks that a resume
# brought them back. req/expect talk to
# the current daemon instance (daemon_use).

need_criu() {
  command -v criu >/dev/null || skip "criu is needed (tests/deps.sh builds CRIU 4)"
  criu check >/dev/null 2>&1 || skip "criu check fails on this kernel: $(criu check 2>&1 | tail -1)"
}

# The Python process: its counter lives in its memory (x), written to /tmp/count every 50 ms;
# a restarted one would start again at 1000. Two background sleeps, one holding the exec's own
# stdin (/dev/null from the host: sandboxd/core/exec.c), and a file in /workspace.
STATEFUL='{"argv":["sh","-c","echo kept > /workspace/f; sleep 1000 </dev/null >/dev/null 2>&1 & sleep 1001 >/dev/null 2>&1 & python3 -c \"import time\nx = 1000\nwhile True:\n    x += 1\n    open(\\\"/tmp/count.new\\\", \\\"w\\\").write(str(x))\n    __import__(\\\"os\\\").rename(\\\"/tmp/count.new\\\", \\\"/tmp/count\\\")\n    time.sleep(0.05)\" </dev/null >/dev/null 2>&1 &"]}'

run_in() { # ID ARGV-JSON -> OUT (stdout)
  req POST "/v1/sandboxes/$1/exec" -d "{\"argv\":$2}"
  expect 200 '.exit_code == 0'
  OUT=$(echo "$BODY" | jq -r .stdout)
}

# The counter now, and the pids of python and sleep in the sandbox (a python just started may
# not have written it yet: up to 10 s for its first write).
snapshot() { # ID -> COUNT PIDS
  run_in "$1" '["sh","-c","i=0; while [ ! -e /tmp/count ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; cat /tmp/count; echo; pgrep -x python3; pgrep -x sleep"]'
  COUNT=$(echo "$OUT" | sed -n 1p)
  PIDS=$(echo "$OUT" | sed -n '2,$p' | tr '\n' ' ')
  [ "$COUNT" -gt 1000 ] 2>/dev/null || fail "no counter: $OUT"
}

stateful_sandbox() { # [extra create fields] -> ID, COUNT, PIDS
  create "{\"pausable\":true${1:+,$1}}"
  req POST "/v1/sandboxes/$ID/exec" -d "$STATEFUL"
  expect 200
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

COUNTER='x=1000; while :; do x=$((x+1)); echo $x > /tmp/count; sleep 0.05; done'
image_counter() { # ID -> COUNT (the shell's counter, in its memory) LOOP (its pid)
  local out
  for _ in 1 2 3; do
    run_in "$1" '["sh","-c","cat /tmp/count; cat /tmp/loop"]'
    COUNT=$(echo "$OUT" | sed -n 1p) LOOP=$(echo "$OUT" | sed -n 2p)
    [ "$COUNT" -gt 1000 ] 2>/dev/null && return 0
    sleep 0.05 # (read between the loop's truncate and its write)
  done
  fail "no counter: $OUT"
}
image_files() { # ID: what image_sandbox changed on its image, as it left it
  run_in "$1" '["sh","-c","ls /app/sub; cat /app/up /etc/base.txt; [ -e /home/user/notes ] || echo gone; cat /workspace/w"]'
  [ "$OUT" == "$(printf "n\nup\nchanged\ngone\nw")" ] || fail "the sandbox's files on its image: $(echo "$OUT" | tr "\n" " ")"
}
# A pausable sandbox of IMAGE (mkimage.py's, with sleep, and /app/sub: MKIMAGE_APP_SUB=1 or a
# commit that made it) running COUNTER, which deletes a file of the image (a whiteout), replaces
# a directory of it (opaque) and adds a file (and /workspace/w, unless its image's seed has it)
# -> ID COUNT LOOP
image_sandbox() { # IMAGE
  create "{\"pausable\":true,\"image\":\"$1\"}"
  local body; body=$(jq -cn --arg c "$COUNTER" '{argv:["sh","-c",("(" + $c + ") </dev/null >/dev/null 2>&1 & echo $! > /tmp/loop")]}')
  req POST "/v1/sandboxes/$ID/exec" -d "$body"; expect 200 '.exit_code == 0'
  run_in "$ID" '["sh","-c","rm /home/user/notes && rm -r /app/sub && mkdir /app/sub && echo n > /app/sub/n && echo up > /app/up && { [ -e /workspace/w ] || echo w > /workspace/w; }"]'
  image_files "$ID"
  sleep 0.3
  image_counter "$ID"
}
# After a resume: the files as they were, the same loop, its counter went on from where it was
# (only the ticks before the dump froze it and after the restore: not a restarted loop)
image_resumed() { # ID COUNT-BEFORE LOOP-BEFORE
  image_files "$1"
  image_counter "$1"
  [ "$LOOP" == "$3" ] || fail "another loop after the resume: $LOOP vs $3"
  [ "$COUNT" -ge "$2" ] && [ "$COUNT" -lt $(($2 + 60)) ] ||
    fail "the counter: $2 before the pause, $COUNT after the resume (not its memory?)"
}
