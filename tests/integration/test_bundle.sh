#!/usr/bin/env bash
# `make static`'s bundle (build-aux/bundle.sh) runs on a host without the shared libraries: in a
# private mount namespace the host's libcurl, libuv, libjansson, libmicrohttpd, libseccomp and
# libnftables are hidden (empty files bound over them), and the bundled sandboxd, sbx-shim and
# sbx still run a sandbox end to end.

DAEMON_TAG=bundle
source "$(dirname "$0")/../lib/daemon.sh"

TEST_TIMEOUT_runs_without_host_libraries=120

test_runs_without_host_libraries() {
  require_root
  daemon_init
  local T=$DAEMON_ROOT/files
  mkdir -p "$T"
  "$SBX_SRC_DIR/build-aux/bundle.sh" "$SBX_BUILD_DIR" "$T/b" >/dev/null || fail "bundle.sh failed"
  [ -x "$T/b/bin/sandboxd" ] && [ -x "$T/b/bin/sbx" ] && [ -x "$T/b/libexec/sandboxd/sbx-shim" ] ||
    fail "bundle lacks a program"
  # the daemon's wrapper: hide the libraries in its (private) mount namespace, then run it
  cat >"$T/hide.sh" <<HIDE
set -eu
: >"$T/empty"
for l in libcurl.so.4 libuv.so.1 libjansson.so.4 libmicrohttpd.so.12 libseccomp.so.2 libnftables.so.1; do
  f=/usr/lib/x86_64-linux-gnu/\$l
  [ -e "\$f" ] && mount --bind "$T/empty" "\$(readlink -f "\$f")"
done
exec "\$@"
HIDE
  # the bundled daemon finds its own shim (no --shim)
  DAEMON_WRAP=(unshare -m --propagation private sh "$T/hide.sh")
  DAEMON_BIN=$T/b/bin/sandboxd DAEMON_SHIM='' DAEMON_LOG_LEVEL='' start_daemon
  local in_ns=(nsenter -t "$DPID" -m)
  # the build's own binaries no longer start there ...
  if "${in_ns[@]}" "$SBX_BUILD_DIR/sbx" --version >/dev/null 2>&1; then fail "host libraries still visible"; fi
  # ... the bundle does
  local out
  out=$(SBX_HOST="$SOCK" "${in_ns[@]}" "$T/b/bin/sbx" run -- sh -c 'echo bundled; id -u' 2>&1) ||
    { tail -20 "$D/log" >&2; fail "bundled run failed: $out"; }
  echo "$out"
  [[ "$out" == *"bundled"*"1000"* ]] || fail "unexpected output: $out"
  # a grading sandbox finds the bundled sbx-as-agent (next to the shim, static or bundled)
  create '{"profile":"grading","memory":"128Mi"}'
  req POST "/v1/sandboxes/$ID/exec" -d '{"argv":["sh","-c","sbx-as-agent -- id -u"],"user":"grader"}'
  expect 200 '.exit_code == 0 and .stdout == "1000\n"'
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
