#!/usr/bin/env bash
# Integration tests of POST /v1/sandboxes/{id}/pause and /resume. Debian 12's CRIU (3.17) cannot
# start on this project's kernel (6.18: "vdso: Unexpected rt vDSO area bounds"), so the daemon
# refuses a pause with 501 `unsupported` whose message carries what `criu check` said; the
# test runs `criu check` itself and asserts that the refusal names the same failure (or, where
# criu check passes, that the refusal says why CRIU cannot dump a sandbox). The sandbox goes
# on running, commit still works, resume of a running sandbox is 409, and bad bodies are 400.

DAEMON_TAG=pause
source "$(dirname "$0")/../lib/daemon.sh"

TEST_TIMEOUT_pause_refused=60
test_pause_refused() {
  command -v criu >/dev/null || skip "criu is needed (tests/deps.sh)"
  start_daemon
  create '{}'; local id=$ID
  local out rc=0 want
  out=$(criu check 2>&1) || rc=$?
  req POST "/v1/sandboxes/$id/pause"
  expect 501 '.code == "unsupported" and (.message | startswith("pause:"))'
  if [ "$rc" != 0 ]; then
    # CRIU's own first error line (without its "Error (file:line): " prefix)
    want=$(echo "$out" | grep '^Error' | grep -v 'exited, status' | head -1 | sed 's/^[^)]*): //')
    [ -n "$want" ] || fail "criu check failed without an error line: $out"
    echo "$BODY" | jq -e --arg w "$want" '.message | contains($w)' >/dev/null ||
      fail "the refusal does not say what CRIU lacks ($want): $BODY"
  else # a newer CRIU: why it cannot dump a sandbox (tried by hand with CRIU 4.1.1: docs/API.md)
    expect 501 '.message | contains("belong to the target user namespace")'
  fi
  # asked again: the same answer (criu check is run once)
  local first=$BODY
  req POST "/v1/sandboxes/$id/pause" -d '{}'
  expect 501
  [ "$BODY" == "$first" ] || fail "second answer differs: $BODY vs $first"
  req POST "/v1/sandboxes/$id/exec" -d '{"argv":["echo","alive"]}'
  expect 200 '.stdout == "alive\n"'
  req POST "/v1/sandboxes/$id/resume"; expect 409 '.message | contains("not paused")'
  req POST "/v1/sandboxes/$id/pause" -d '{"node":"b"}'; expect 400 '.message | startswith("node")'
  req POST /v1/sandboxes/sb-nope/pause; expect 404
  req DELETE "/v1/sandboxes/$id"; expect 204
  req POST "/v1/sandboxes/$id/pause"; expect 409
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
