#!/usr/bin/env bash
# `make static`'s bundle (build-aux/bundle.sh) runs on a host without the shared libraries: in a
# private mount namespace the host's libcurl, libuv, libjansson, libmicrohttpd, libseccomp and
# libnftables are hidden (empty files bound over them), and the bundled sandboxd, sbx-shim and
# sbx still run a sandbox end to end.

TEST_TIMEOUT_runs_without_host_libraries=120

# The shim may still be tearing its sandbox down when the daemon stops: retry the rmdir.
cleanup_bundle() {
  local i c
  for i in $(seq 50); do
    for c in /sys/fs/cgroup/*/sbxbundle-$$; do [ -d "$c" ] && rmdir "$c" 2>/dev/null; done
    compgen -G "/sys/fs/cgroup/*/sbxbundle-$$" >/dev/null || break
    sleep 0.1
  done
  rm -rf "${T:-/nonexistent}"
}

test_runs_without_host_libraries() {
  require_root
  T=""
  T=$(mktemp -d /tmp/sbx-bundle-test.XXXXXX)
  trap cleanup_bundle EXIT
  "$SBX_SRC_DIR/build-aux/bundle.sh" "$SBX_BUILD_DIR" "$T/b" >/dev/null || fail "bundle.sh failed"
  [ -x "$T/b/bin/sandboxd" ] && [ -x "$T/b/bin/sbx" ] && [ -x "$T/b/libexec/sandboxd/sbx-shim" ] ||
    fail "bundle lacks a program"
  cat >"$T/inner.sh" <<INNER
set -eu
: >"$T/empty"
for l in libcurl.so.4 libuv.so.1 libjansson.so.4 libmicrohttpd.so.12 libseccomp.so.2 libnftables.so.1; do
  f=/usr/lib/x86_64-linux-gnu/\$l
  [ -e "\$f" ] && mount --bind "$T/empty" "\$(readlink -f "\$f")"
done
# the build's own binaries no longer start ...
if "$SBX_BUILD_DIR/sbx" --version >/dev/null 2>&1; then echo "host libraries still visible"; exit 3; fi
# ... the bundle does
"$T/b/bin/sandboxd" --socket "$T/sock" --run-dir "$T/run" --state-dir "$T/state" \
  --cgroup-parent sbxbundle-$$ --seccomp-profile "$SBX_SRC_DIR/policy/seccomp.json" >"$T/log" 2>&1 &
pid=\$!
for i in \$(seq 100); do [ -S "$T/sock" ] && break; sleep 0.1; done
out=\$(SBX_HOST="$T/sock" "$T/b/bin/sbx" run -- sh -c 'echo bundled; id -u') || { cat "$T/log"; kill \$pid; exit 4; }
kill \$pid; wait \$pid || true
echo "\$out"
INNER
  local out
  out=$(unshare -m --propagation private bash "$T/inner.sh" 2>&1) || fail "inner run failed: $out"
  [[ "$out" == *"bundled"*"1000"* ]] || fail "unexpected output: $out"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
