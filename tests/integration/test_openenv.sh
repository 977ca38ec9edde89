#!/usr/bin/env bash
# An OpenEnv-style environment end to end (docs/INTEGRATIONS.md "OpenEnv"): an image built here
# from a rootfs tarball (mkenvimage.py: python3 and openenv_server.py, imported with
# `sbx image import`), a sandbox from it whose "entrypoint" serves /reset, /step and /state on
# port 8000, and an episode driven through the port by the Python SDK (openenv_episode.py:
# wait_for_port, get_host + urllib, port_request). Bad input: "entrypoint" of the wrong type or
# true on an image without one (400 naming entrypoint), an entrypoint that cannot start (the
# create fails, the sandbox ends), a server whose port never opens (wait_for_port's clear error
# in the time given, not a hang).

DAEMON_TAG=openenv
source "$(dirname "$0")/../lib/daemon.sh"

PY=${SBX_PYTHON:-/usr/bin/python3}
HERE="$(cd "$(dirname "$0")" && pwd)"

env_image() { # NAME: build the rootfs tarball and import it with the CLI
  "$PY" "$HERE/mkenvimage.py" "$D/env.tar" "$HERE/openenv_server.py" || fail "mkenvimage"
  SBX_HOST="unix:$SOCK" "$(bin sbx)" image import "$D/env.tar" "$1" >/dev/null || fail "sbx image import"
}

sdk() { # python code args...: the SDK against the daemon's TCP listener
  env $(asan_env) SBX_HOST="http://127.0.0.1:$TCP" SBX_TOKEN="$TOK" \
    SANDBOXD_LIBSBX="$SBX_BUILD_DIR/libsbx.so.0" PYTHONPATH="$SBX_SRC_DIR/python" \
    PYTHONDONTWRITEBYTECODE=1 timeout 60 "$PY" "$@"
}

TEST_TIMEOUT_episode=90
test_episode() {
  "$PY" -c 'import http.server' 2>/dev/null || skip "python3 is not installed"
  TCP=$(free_port) TOK="tok-$RANDOM$RANDOM"
  start_daemon --tcp "127.0.0.1:$TCP" --token "$TOK"
  env_image openenv:v1
  local out
  out=$(sdk "$HERE/openenv_episode.py" openenv:v1 "$TOK" 2>&1) || fail "episode: $out"
  grep -q '^urllib episode ok \[0.0, 0.0, 1.0\]' <<<"$out" || fail "urllib episode: $out"
  grep -q '^libsbx episode ok \[0.0, 0.0, 0.0\]' <<<"$out" || fail "libsbx episode: $out"
  grep -q '^async episodes ok 3' <<<"$out" || fail "AsyncSandbox episodes: $out"
  # the with block ended the SDK's sandbox
  req GET /v1/sandboxes
  expect 200 'length == 4 and all(.state == "ended" and .image == "openenv:v1")'
  # over the API: the 201 names the entrypoint's pid, the process table shows it running
  create '{"image":"openenv:v1","ports":[8000],"entrypoint":["python3","/srv/env.py","8000"]}'
  jq -e '.entrypoint.pid > 0 and .entrypoint.argv[1] == "/srv/env.py"' <<<"$BODY" >/dev/null ||
    fail "201 without the entrypoint: $BODY"
  req GET "/v1/sandboxes/$ID/processes"
  expect 200 '[.processes[] | select(.state == "running" and .argv[1] == "/srv/env.py")] | length == 1'
}

TEST_TIMEOUT_bad=90
test_bad() {
  "$PY" -c 'import http.server' 2>/dev/null || skip "python3 is not installed"
  TCP=$(free_port) TOK="tok-$RANDOM$RANDOM"
  start_daemon --tcp "127.0.0.1:$TCP" --token "$TOK"
  env_image openenv:v1
  local b
  for b in '"yes"' '[]' '[""]' '[1]' '{}' '3'; do
    req POST /v1/sandboxes -d "{\"image\":\"openenv:v1\",\"entrypoint\":$b}"
    expect 400 '.code == "invalid_argument" and (.message | startswith("entrypoint"))'
  done
  req POST /v1/sandboxes -d '{"image":"openenv:v1","entrypoint":true}'
  expect 400 '.message | test("^entrypoint: image openenv:v1 has no Entrypoint or Cmd")'
  req POST /v1/sandboxes -d '{"entrypoint":true}'
  expect 400 '.message | startswith("entrypoint: image host")'
  req POST /v1/sandboxes -d '{"image":"nosuch:v1","entrypoint":true}'
  expect 404
  req GET /v1/sandboxes
  expect 200 'length == 0'
  # a command that cannot start: the create fails with the reason, the sandbox ends
  req POST /v1/sandboxes -d '{"image":"openenv:v1","entrypoint":["/no/such/server"]}'
  if [ "$CODE" == 400 ]; then
    jq -e '.code == "entrypoint_failed"' <<<"$BODY" >/dev/null || fail "entrypoint failure: $BODY"
    req GET /v1/sandboxes
    expect 200 'map(select(.state != "ended")) | length == 0'
  else # exec reports a missing file as exit 127 of a started command: it started, and exited
    expect 201 '.entrypoint.pid > 0'
  fi
  # a server whose port never opens: a clear error after the timeout given, not a hang
  local out
  out=$(sdk -c '
import sys, time, sandboxd
with sandboxd.Sandbox.create(image=sys.argv[1], ports=[8000],
                             entrypoint=["python3", "-c", "import time; time.sleep(120)"]) as sb:
    t = time.monotonic()
    try:
        sb.wait_for_port(8000, timeout=1.5)
        print("wait_for_port returned")
    except sandboxd.Conflict as e:
        print("timeout", round(time.monotonic() - t) <= 10, e.code, e)
    try:
        sb.wait_for_port(8001, timeout=5)
    except sandboxd.NotFound as e:
        print("not open", e.code)
    try:
        sb.port_request(8000, "GET", "/")
    except sandboxd.SandboxdError as e:
        print("refused", e.code, e)
' openenv:v1 2>&1) || fail "port never opens: $out"
  grep -q '^timeout True port_wait_timeout .*port 8000 of sandbox .* did not answer within 1.5 s (last: .*refused' <<<"$out" ||
    fail "wait_for_port on a closed port: $out"
  grep -q '^not open port_not_open' <<<"$out" || fail "wait_for_port on a port not opened: $out"
  grep -q '^refused port_unreachable .*refused' <<<"$out" || fail "port_request to a closed port: $out"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
