#!/usr/bin/env bash
# The Python SDK (python/sandboxd) and the SandboxFusion-compatible endpoints, tested with
# pytest against a real daemon: each case starts one (tests/lib/daemon.sh), points the SDK at it
# (SBX_HOST, SANDBOXD_LIBSBX) and runs one pytest file; pytest's own fixture checks that no
# sandbox is left running. Also: a daemon whose shim cannot start answers SandboxError, the
# token-protected TCP port never serves the endpoints without the token, and the package
# installs offline with pip and with `make install`.

DAEMON_TAG=py
source "$(dirname "$0")/../lib/daemon.sh"

# Debian's interpreter (where python3-pytest and friends are), unless told otherwise.
PY=${SBX_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3

need_pytest() {
  "$PY" -c 'import pytest' 2>/dev/null || skip "python3-pytest is needed"
}

pytest_run() { # FILE [pytest args...] ($PYTEST_SBX_HOST: the SDK's SBX_HOST, else the socket)
  local f=$1; shift
  env $(asan_env) SBX_HOST="${PYTEST_SBX_HOST:-unix:$SOCK}" SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" \
    PYTHONPATH="$SBX_SRC_DIR/python" PYTHONDONTWRITEBYTECODE=1 \
    "$PY" -m pytest -q -p no:cacheprovider -rfEs "$SBX_SRC_DIR/python/tests/$f" "$@" >"$D/pytest.out" 2>&1 \
    || { tail -20 "$D/log" >&2; echo "---- pytest ----" >&2; grep -E '^(E |FAILED|ERROR|>)' "$D/pytest.out" | tail -30 >&2
         tail -3 "$D/pytest.out" >&2; fail "pytest $f failed"; }
  tail -1 "$D/pytest.out"
  if grep -q 'skipped' <(tail -1 "$D/pytest.out"); then # a prerequisite is missing: loud, and CI fails
    grep -E 'SKIP' "$D/pytest.out" >&2 || true
    [ "${CI:-}" != "true" ] || fail "pytest skipped cases in CI: $(tail -1 "$D/pytest.out")"
    echo "WARNING: pytest skipped cases (see above)" >&2
  fi
}

TEST_TIMEOUT_sdk=400 TEST_PASS_sdk=plain # (tests/README.md: once)
test_sdk() {
  need_pytest
  start_daemon --max-sandboxes 210 --max-starting 16
  SANDBOXD_MAX_SANDBOXES=210 pytest_run test_sdk.py
}

# The SDK's client side (python/tests/test_sdk_client.py): a refused token raises, a token of
# 1600 bytes reaches the TCP port whole (sbx here, the SDK sync and async there), an endpoint
# whose /v1/info is not an object is named, a lease's renewing goes on past failed renewals
# and stops when the token is refused, and wait_for_port keeps its timeout. Both passes: short,
# on libsbx's header and timeout paths.
TEST_TIMEOUT_sdk_client=120
test_sdk_client() {
  need_pytest
  local port token; port=$(free_port); token=$(head -c 1600 /dev/zero | tr '\0' t)
  start_daemon --tcp "127.0.0.1:$port" --token "$token"
  SBX_TOKEN=$token "$(bin sbx)" --host "http://127.0.0.1:$port" ls >/dev/null ||
    fail "sbx ls with a token of 1600 bytes"
  SBX_TCP_HOST="http://127.0.0.1:$port" SBX_TCP_TOKEN=$token pytest_run test_sdk_client.py
}

# Forks with the fields libsbx sends as extra JSON (on_idle, ports, volumes, pausable) and
# AsyncSandbox's refusals before sending (sbx_async_submit_error's message).
TEST_TIMEOUT_sdk_fork=200 TEST_PASS_sdk_fork=plain
test_sdk_fork() {
  need_pytest
  start_daemon
  pytest_run test_sdk_fork.py
}

# The SDK's object lifetimes (python/tests/test_sdk_lifecycle.py): a KeyboardInterrupt right
# after a create or fork ends the sandboxes it made, a child of os.fork() gets connections and
# worker threads of its own, a lease's renew_every is checked, exec through a closed Client
# raises "closed", and a failed terminate on leaving a with block does not replace its exception.
TEST_TIMEOUT_sdk_lifecycle=120
test_sdk_lifecycle() {
  need_pytest
  start_daemon
  pytest_run test_sdk_lifecycle.py
}

# Ctrl-C in a synchronous Sandbox.run() (python/tests/test_sdk_interrupt.py): a child Python
# sent SIGINT while it waits raises KeyboardInterrupt within a second (libsbx watches the
# interpreter's wakeup fd: sbx_client_set_interrupt_fd), the command goes on until its sandbox
# ends (a with block ends it), the Sandbox still works. On the Unix socket and on a TCP port
# (libcurl's path: a remote daemon, a fleet's nodes). Both passes: short.
TEST_TIMEOUT_sdk_interrupt=180
test_sdk_interrupt() {
  need_pytest
  local port token="intr-$$"; port=$(free_port)
  start_daemon --tcp "127.0.0.1:$port" --token "$token"
  pytest_run test_sdk_interrupt.py
  PYTEST_SBX_HOST="http://127.0.0.1:$port" SBX_TOKEN=$token pytest_run test_sdk_interrupt.py
}

# AsyncSandbox under cancellation and Ctrl-C (python/tests/test_sdk_aio_cancel.py): wait_for and
# cancel of each call, prompt and quiet, the sandbox usable after; a create or fork cancelled as
# asyncio.run ends (a Ctrl-C in a create included) still ends its sandboxes; Ctrl-C in a long
# run() ends the program at once; many calls on one engine, half cancelled; a call cancelled while
# a stand-in daemon (the test's) is slow to answer holds nothing up and has nothing freed under
# it. The shim waits while $D/hold exists (a create or fork stays in flight), with no spare shim
# started ahead of it.
TEST_TIMEOUT_sdk_aio_cancel=180
test_sdk_aio_cancel() {
  need_pytest
  daemon_use sd
  printf '#!/bin/sh\nwhile [ -e "%s/hold" ]; do sleep 0.05; done\nexec "%s" "$@"\n' \
    "$D" "$(bin sbx-shim)" >"$D/shim.sh"
  chmod +x "$D/shim.sh"
  DAEMON_SHIM="$D/shim.sh" start_daemon --spare-shims 0
  SBX_AIO_HOLD="$D/hold" pytest_run test_sdk_aio_cancel.py
}

TEST_TIMEOUT_sandboxfusion=500 TEST_PASS_sandboxfusion=plain
test_sandboxfusion() {
  need_pytest
  "$PY" -c 'import requests' 2>/dev/null || skip "python3-requests is needed"
  local port; port=$(free_port)
  start_daemon --sandboxfusion-listen "127.0.0.1:$port" --sandboxfusion-max-running 16 \
    --max-sandboxes 40
  grep -q "SandboxFusion endpoints on 127.0.0.1:$port" "$D/log" || fail "no log line for the listener"
  ! grep -q "without a token" "$D/log" || fail "a loopback listener must not warn"
  SANDBOXD_SF_URL="http://127.0.0.1:$port" pytest_run test_sandboxfusion.py
}

# The endpoints on the Unix socket, and a daemon that cannot start sandboxes: SandboxError.
TEST_TIMEOUT_sandboxfusion_shim_fails=60
test_sandboxfusion_shim_fails() {
  start_daemon --shim /bin/false
  req GET /v1/ping; expect 200 '. == "pong"'
  req POST /run_code -d '{"code":"print(1)","language":"python"}'
  expect 200 '.status == "SandboxError" and (.message | test("could not be started")) and .run_result == null'
  req POST /run_code -d '{"code":"print(1)","language":"python"}'
  expect 200 '.status == "SandboxError"'
  req GET /v1/sandboxes; expect 200 'all(.[]; .state == "ended")'
}

# With a matching warm pool, requests take its entries (pool hits) and it refills.
TEST_TIMEOUT_sandboxfusion_pool=90
test_sandboxfusion_pool() {
  start_daemon --pool 'size=2,memory=1Gi'
  wait_ready 2 30
  local i
  for i in 1 2 3; do
    req POST /run_code -d '{"code":"print(6*7)","language":"python","memory_limit_MB":1024}'
    expect 200 '.status == "Success" and .run_result.stdout == "42\n"'
  done
  [ "$(metric sandboxd_pool_hits_total)" -ge 2 ] || fail "no pool hits: $(metric sandboxd_pool_hits_total)"
  wait_ready 2 30
  req GET /v1/sandboxes; expect 200 'all(.[]; .state == "ended")'
}

# A node that stays full: the request waits its queue timeout, then SandboxError (not Failed).
TEST_TIMEOUT_sandboxfusion_node_full=60
test_sandboxfusion_node_full() {
  start_daemon --max-sandboxes 1 --sandboxfusion-queue-timeout 1
  create '{"cpu":0.25,"memory":"64Mi"}'
  req POST /run_code -d '{"code":"print(1)","language":"python"}'
  expect 200 '.status == "SandboxError" and (.message | test("full")) and .run_result == null'
  req DELETE "/v1/sandboxes/$ID"; expect 204
  req POST /run_code -d '{"code":"print(1)","language":"python"}'
  expect 200 '.status == "Success"'
}

# A request that waits for room is counted once (one "full" create, one pool miss, one request
# toward its shape's demand), however long it waits: each 100 ms retry counted them all, and
# the demand pool grew with them.
TEST_TIMEOUT_sandboxfusion_wait_counted_once=60
test_sandboxfusion_wait_counted_once() {
  start_daemon --max-sandboxes 1
  create '{"cpu":0.25,"memory":"64Mi"}'
  local full0 miss0 bg
  full0=$(metric 'sandboxd_sandbox_creates_total{outcome="full"}')
  miss0=$(metric sandboxd_pool_misses_total)
  curl -s --max-time 30 --unix-socket "$SOCK" -o "$D/rc.json" http://sd/run_code \
    -d '{"code":"print(7)","language":"python"}' &
  bg=$!
  sleep 2 # about 20 retries
  req DELETE "/v1/sandboxes/$ID"; expect 204
  wait "$bg" || fail "the waiting request failed"
  jq -e '.status == "Success" and .run_result.stdout == "7\n"' "$D/rc.json" >/dev/null ||
    fail "the waiting request: $(cat "$D/rc.json")"
  local full miss
  full=$(metric 'sandboxd_sandbox_creates_total{outcome="full"}')
  miss=$(metric sandboxd_pool_misses_total)
  [ "$full" == $((${full0:-0} + 1)) ] || fail "full creates counted: ${full0:-0} -> $full"
  [ "$miss" -le $((${miss0:-0} + 2)) ] || fail "pool misses counted: ${miss0:-0} -> $miss"
}

# Sandboxes whose environment is large (20,000 bytes from the daemon's defaults): code near the
# inline bound no longer fits in the shim's request with it, so it is written by a command of
# its own first; the program runs whole, with the environment, for a run and for a compile
# (was SandboxError: the request was too large to send).
TEST_TIMEOUT_sandboxfusion_large_env=90
test_sandboxfusion_large_env() {
  CFG=$(mktemp /tmp/sbx-pycfg.XXXXXX)
  local big; big=$(head -c 20000 /dev/zero | tr '\0' e)
  jq -nc --arg b "$big" '{defaults:{env:{BIG:$b}}}' >"$CFG"
  start_daemon --config "$CFG"
  trap 'daemon_cleanup; rm -f "$CFG"' EXIT
  local pad code; pad=$(head -c 47000 /dev/zero | tr '\0' '#')
  code="import os
print(len(open(__file__).read()), len(os.environ['BIG']))
$pad"
  jq -nc --arg c "$code" '{language:"python", code:$c}' >"$D/py.json"
  req POST /run_code --data-binary "@$D/py.json"
  expect 200 ".status == \"Success\" and .run_result.stdout == \"${#code} 20000\\n\""
  jq -nc --arg p "$pad" '{language:"cpp", code:("#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n" +
    "int main(){std::printf(\"%zu\\n\", std::strlen(std::getenv(\"BIG\")));}\n//" + $p)}' \
    >"$D/cpp.json"
  req POST /run_code --data-binary "@$D/cpp.json"
  expect 200 '.status == "Success" and .run_result.stdout == "20000\n"'
  req POST /run_code -d '{"code":"print(6*7)","language":"python"}'
  expect 200 '.status == "Success" and .run_result.stdout == "42\n"'
}

# A command that fills the daemon's output budget (64 MiB buffered for all commands) and holds
# it: a request's output is cut to nothing by it, which must be SandboxError (a platform fault),
# never Success with an empty stdout (a wrong answer to verl). The hog is an exec of the API's
# (a request's program keeps 1 MiB a stream, as SandboxFusion's: it cannot fill the budget). A
# fetched file larger than the 64 MiB a command's output keeps is SandboxError naming it, never
# returned cut.
TEST_TIMEOUT_sandboxfusion_output_budget=120
test_sandboxfusion_output_budget() {
  start_daemon
  create; local sb=$ID i
  curl -s --max-time 90 --unix-socket "$SOCK" -o "$D/hog.json" "http://sd/v1/sandboxes/$sb/exec" \
    -d '{"argv":["python3","-c","import sys, time\nsys.stdout.write(\"x\" * (64 << 20)); sys.stdout.flush()\nopen(\"/tmp/full\", \"w\").close(); time.sleep(60)"],
    "max_output":"64Mi","timeout":"40s"}' &
  local hog=$!
  for i in $(seq 300); do # until the hog has written its 64 MiB (its file says so)
    req GET "/v1/sandboxes/$sb/files?path=/tmp/full" && [ "$CODE" == 200 ] && break
    sleep 0.1
  done
  [ "$CODE" == 200 ] || fail "the hog did not write its output: $BODY"
  req POST /run_code -d '{"code":"print(6*7)","language":"python"}'
  expect 200 '.status == "SandboxError" and (.message | test("output budget")) and .run_result == null'
  req DELETE "/v1/sandboxes/$sb"; expect 204
  wait "$hog" || true
  req POST /run_code -d '{"code":"print(6*7)","language":"python"}'
  expect 200 '.status == "Success" and .run_result.stdout == "42\n"'
  req POST /run_code -d '{"language":"python","fetch_files":["big","small"],
    "code":"open(\"big\", \"wb\").write(b\"a\" * ((64 << 20) + 1)); open(\"small\", \"w\").write(\"s\")"}'
  expect 200 '.status == "SandboxError" and (.message | test("fetch_files: big is larger than 64 MiB"))'
}

# A store image as the operator's default: its layers are looked into for the language's
# programs, as its sandboxes see them (its name was looked for as a directory relative to the
# daemon's cwd, so every language was refused as missing, even one the image has).
TEST_TIMEOUT_sandboxfusion_store_image=60
test_sandboxfusion_store_image() {
  echo '{"defaults":{"image":"withbash:v1"}}' >"$D/cfg.json"
  start_daemon --config "$D/cfg.json"
  MKIMAGE_EXTRA_BINS=bash python3 "$(dirname "$0")/mkimage.py" oci "$D/img.tar" || fail "mkimage"
  req POST '/v1/images?name=withbash:v1' -H 'Content-Type: application/x-tar' \
    --data-binary @"$D/img.tar"
  expect 201
  req POST /run_code -d '{"code":"echo in $BASH_VERSION; cat /etc/base.txt","language":"bash"}'
  expect 200 '.status == "Success" and (.run_result.stdout | startswith("in 5.")) and (.run_result.stdout | endswith("changed\n"))'
  req POST /run_code -d '{"code":"print(1)","language":"python"}'
  expect 200 '.status == "SandboxError" and (.message | contains("no python3"))'
}

# An image without the toolchains (the operator's default, a config directory image): every
# language is refused by name, as SandboxError.
TEST_TIMEOUT_sandboxfusion_missing_toolchain=60
test_sandboxfusion_missing_toolchain() {
  local img
  img=$(mktemp -d /tmp/sbx-pyimg.XXXXXX)
  daemon_at_exit rm -rf "$img" "$img.json" # (before the start: a start that fails removes it too)
  mkdir -p "$img/usr/bin"
  printf '{"images":{"bare":"%s"},"defaults":{"image":"bare"}}' "$img" >"$img.json"
  start_daemon --config "$img.json"
  local lang prog
  for lang in python:python3 cpp:g++ bash:bash java:javac; do
    req POST /run_code -d "{\"code\":\"x\",\"language\":\"${lang%%:*}\"}"
    prog=${lang#*:}
    expect 200 ".status == \"SandboxError\" and (.message | contains(\"no $prog\")) and .run_result == null"
  done
  req POST /run_jupyter -d '{"cells":["1"]}'
  expect 200 '.status == "SandboxError" and (.message | contains("no python3"))'
  req GET /v1/sandboxes; expect 200 'length == 0'
}

# Rust is compiled as SandboxFusion compiles it (sandbox/runners/major.py): `rustc FILE -o test`,
# without -O (with it, an integer overflow wraps where SandboxFusion's build panics, exit 101).
# The test image has no rustc: a stand-in in a directory image (mkimage.py's runnable root)
# records its argv and builds a main that prints; fetch_files returns the argv (was -O).
TEST_TIMEOUT_sandboxfusion_rust_command=60
test_sandboxfusion_rust_command() {
  daemon_init
  local img=$DAEMON_ROOT/rustimg
  mkdir -p "$img"
  MKIMAGE_EXTRA_BINS=chmod python3 "$(dirname "$0")/mkimage.py" rootfs "$DAEMON_ROOT/root.tar" ||
    fail "mkimage"
  tar -xf "$DAEMON_ROOT/root.tar" -C "$img" || fail "extract the image"
  printf '%s\n' '#!/usr/bin/sh' 'for a; do printf "%s\n" "$a"; done >rustc.argv' \
    'printf "#!/usr/bin/sh\necho stand-in\n" >main && chmod +x main' >"$img/usr/bin/rustc"
  chmod 755 "$img/usr/bin/rustc"
  printf '{"images":{"rustimg":"%s"},"defaults":{"image":"rustimg"}}' "$img" >"$DAEMON_ROOT/cfg.json"
  start_daemon --config "$DAEMON_ROOT/cfg.json"
  req POST /run_code -d '{"code":"fn main() {}","language":"rust","fetch_files":["rustc.argv"]}'
  expect 200 '.status == "Success" and .compile_result.return_code == 0 and .run_result.stdout == "stand-in\n"'
  local argv; argv=$(echo "$BODY" | jq -r '.files["rustc.argv"]' | base64 -d)
  [ "$argv" == $'main.rs\n-o\nmain' ] || fail "rustc's argv: $(echo "$argv" | tr '\n' ' ')"
}

# SIGTERM with a request running: the daemon stops cleanly (exit 0), the request's sandbox is
# ended (not left running like API sandboxes are), and the client gets SandboxError or, when the
# listener closed first, no answer (never Failed).
TEST_TIMEOUT_sandboxfusion_shutdown=90
test_sandboxfusion_shutdown() {
  start_daemon
  curl -s --max-time 60 --unix-socket "$SOCK" -X POST http://sd/run_code \
    -d '{"code":"import time; time.sleep(40)","language":"python","run_timeout":60}' >"$D/answer" &
  local cpid=$! i
  for i in $(seq 100); do
    req GET '/v1/sandboxes?label=sandboxfusion=run_code'
    echo "$BODY" | jq -e 'length == 1 and .[0].state == "running"' >/dev/null && break
    sleep 0.1
  done
  echo "$BODY" | jq -e 'length == 1' >/dev/null || fail "the request's sandbox did not start: $BODY"
  stop_daemon
  wait "$cpid" || true
  if [ -s "$D/answer" ]; then
    jq -e '.status == "SandboxError" and (.message | test("shutting down"))' "$D/answer" >/dev/null \
      || fail "answer at shutdown: $(cat "$D/answer")"
  fi
  start_daemon
  req GET '/v1/sandboxes?label=sandboxfusion=run_code'
  expect 200 'length == 1 and .[0].state == "ended" and .[0].end.reason == "terminated"'
}

# --tcp is token-protected: the endpoints are there only with the token; a non-loopback
# --sandboxfusion-listen logs a warning.
TEST_TIMEOUT_sandboxfusion_token_port=60
test_sandboxfusion_token_port() {
  local port sfport; port=$(free_port); sfport=$(free_port)
  while [ "$sfport" == "$port" ]; do sfport=$(free_port); done
  start_daemon --tcp "127.0.0.1:$port" --token s3cret --sandboxfusion-listen "0.0.0.0:$sfport"
  grep -q "without a token" "$D/log" || fail "no warning for a non-loopback listener"
  local code
  code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://127.0.0.1:$port/run_code" \
    -d '{"code":"print(1)","language":"python"}')
  assert_eq "$code" 401 "run_code on the token port without the token"
  out=$(curl -s -H 'Authorization: Bearer s3cret' -X POST "http://127.0.0.1:$port/run_code" \
    -d '{"code":"print(1)","language":"python"}')
  echo "$out" | jq -e '.status == "Success" and .run_result.stdout == "1\n"' >/dev/null \
    || fail "run_code with the token: $out"
  out=$(curl -s "http://127.0.0.1:$sfport/v1/ping")
  assert_eq "$out" '"pong"' "ping on the SandboxFusion listener"
}

TEST_TIMEOUT_install=120
test_install() {
  T=$(mktemp -d /tmp/sbx-pyinstall.XXXXXX)
  trap 'rm -rf "$T"' EXIT
  local t=$T
  "$PY" -m pip --version >/dev/null 2>&1 || skip "python3-pip is needed"
  cp -r "$SBX_SRC_DIR/python" "$t/src" # setuptools builds in the source folder: a copy of it
  (cd "$t" && PIP_NO_INDEX=1 "$PY" -m pip install -q --no-build-isolation --no-deps \
    --no-index --target "$t/pip" ./src) >"$t/pip.log" 2>&1 || { cat "$t/pip.log" >&2; fail "pip install"; }
  [ -f "$t/pip/sandboxd/__init__.py" ] && [ -f "$t/pip/sandboxd/aio.py" ] || fail "pip did not install the package"
  env $(asan_env) SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" PYTHONPATH="$t/pip" "$PY" -c \
    'import sandboxd; assert sandboxd.parse_size("1Ki", "x") == 1024' || fail "the pip-installed package does not work"
  local extra=() # (a stale object is rebuilt with its build's flags)
  [[ "$(basename "$SBX_BUILD_DIR")" == build-san* ]] && extra=(SANITIZE=1)
  make -s -C "$SBX_SRC_DIR" B="$SBX_BUILD_DIR" "${extra[@]}" install DESTDIR="$t/root" PREFIX=/usr >"$t/make.log" 2>&1 \
    || { cat "$t/make.log" >&2; fail "make install"; }
  [ -f "$t/root/usr/lib/python3/dist-packages/sandboxd/__init__.py" ] || fail "make install did not install the package"
  # found next to libsbx by the plain soname when the library is installed: here by the env var
  env $(asan_env) PYTHONPATH="$t/root/usr/lib/python3/dist-packages" SANDBOXD_LIBSBX="$t/root/usr/lib/libsbx.so.0" \
    "$PY" -c 'import sandboxd; sandboxd.parse_duration_ms("1s", "x")' || fail "make-installed package"
}

source "$(dirname "$0")/../lib/lib.sh"
