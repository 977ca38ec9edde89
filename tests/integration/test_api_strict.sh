#!/usr/bin/env bash
# Strictness of the API at its edges, against a real daemon: every number in the create, exec,
# timeout, fork and lease bodies outside its documented range (docs/API.md) is a 400 naming the
# field; HTTP framing that a proxy could read differently (RFC 9112: two Content-Lengths, a
# space before a header's colon, bare LF line ends, a Transfer-Encoding other than chunked) is
# a 400 and never hangs; an exec that hits the sandbox's own pids limit is a result, not a 500.

DAEMON_TAG=strict
source "$(dirname "$0")/../lib/daemon.sh"

bad_number() { # METHOD PATH BODY FIELD: a 400 invalid_argument whose message starts with FIELD
  req "$1" "$2" -H 'Content-Type: application/json' -d "$3"
  [ "$CODE" == 400 ] || fail "$1 $2 $3: expected 400, got $CODE: $BODY"
  echo "$BODY" | jq -e --arg f "$4:" '.code == "invalid_argument" and (.message | startswith($f))' \
    >/dev/null || fail "$1 $2 $3: the 400 does not name $4: $BODY"
}

test_number_ranges() {
  start_daemon
  create; local id=$ID S=/v1/sandboxes/$ID
  req POST /v1/leases -d '{"ttl":"5m"}'; expect 201
  local c
  for c in '{"cpu":5e-324}' '{"cpu":1e-7}' '{"cpu":0.005}' '{"cpu":1e308}'; do
    bad_number POST /v1/sandboxes "$c" cpu
    bad_number POST "$S/fork" "{\"count\":1,${c:1}" cpu
  done
  for c in '{"max_cost_usd":5e-324}' '{"max_cost_usd":1e308}' '{"max_cost_usd":1e-7}' '{"max_cost_usd":0}'; do
    bad_number POST /v1/sandboxes "$c" max_cost_usd
    bad_number POST "$S/fork" "{\"count\":1,${c:1}" max_cost_usd
  done
  bad_number POST /v1/sandboxes '{"memory":1e308}' memory
  bad_number POST /v1/sandboxes '{"disk":1e-400}' disk
  bad_number POST /v1/sandboxes '{"pids":8.5}' pids
  bad_number POST /v1/sandboxes '{"timeout":5e-324}' timeout
  bad_number POST /v1/sandboxes '{"idle_timeout":1e308}' idle_timeout
  bad_number POST "$S/exec" '{"argv":["true"],"max_output":1e-400}' max_output
  bad_number POST "$S/exec" '{"argv":["true"],"max_output":0}' max_output
  bad_number POST "$S/exec" '{"argv":["true"],"max_output":1e308}' max_output
  bad_number POST "$S/exec" '{"argv":["true"],"timeout":5e-324}' timeout
  bad_number POST "$S/exec" '{"argv":["true"],"timeout":1e308}' timeout
  bad_number POST "$S/timeout" '{"timeout":1e-400}' timeout
  bad_number POST "$S/timeout" '{"timeout":604801}' timeout
  bad_number POST /v1/leases '{"ttl":5e-324}' ttl
  bad_number POST /v1/leases '{"ttl":1e308}' ttl
  bad_number POST "$S/fork" '{"count":1e-400}' count
  bad_number POST "$S/fork" '{"count":257}' count
  # the edges are accepted
  req POST "$S/exec" -d '{"argv":["echo","hello"],"max_output":1,"timeout":0.001}'
  [ "$CODE" == 200 ] || fail "max_output 1: $CODE $BODY"
  req POST "$S/exec" -d '{"argv":["echo","hello"],"max_output":1}'
  expect 200 '.stdout == "h" and .stdout_truncated == true'
  req POST /v1/sandboxes -d '{"cpu":0.01,"max_cost_usd":1e-6}'
  expect 201 '.limits.cpu == 0.01 and .limits.max_cost_usd == 0.000001'
  req POST /v1/sandboxes -d '{"max_cost_usd":1e6}'; expect 201 '.limits.max_cost_usd == 1000000'
  req GET /v1/sandboxes; expect 200 'length == 3'
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
