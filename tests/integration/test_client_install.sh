#!/usr/bin/env bash
# libsbx as users get it: `make install` into a staging dir, then docs/examples/hello.c compiled
# against the INSTALLED header, library and pkg-config file (shared and static), and run against
# a real daemon.

DAEMON_TAG=install
source "$(dirname "$0")/../lib/daemon.sh"

test_install_and_compile_hello() {
  set +e # every step is checked explicitly
  require_root
  daemon_init
  T=$DAEMON_ROOT/files
  mkdir -p "$T"
  local stage=$T/stage extra=()
  [[ "$(basename "$SBX_BUILD_DIR")" == build-san* ]] && extra=(SANITIZE=1)
  make -s -C "$SBX_SRC_DIR" install DESTDIR="$stage" PREFIX=/usr B="$SBX_BUILD_DIR" "${extra[@]}" \
    >"$T/install.log" 2>&1 || { cat "$T/install.log" >&2; fail "make install failed"; }
  [ -f "$stage/usr/include/sbx.h" ] || fail "sbx.h not installed"
  [ -f "$stage/usr/lib/pkgconfig/libsbx.pc" ] || fail "libsbx.pc not installed"
  [ -e "$stage/usr/lib/libsbx.so" ] && [ -f "$stage/usr/lib/libsbx.a" ] || fail "library not installed"
  # only the public API is exported from the shared library
  local syms
  syms=$(nm -D --defined-only "$stage/usr/lib/libsbx.so.0" | awk '{print $3}' | sed 's/@.*//')
  echo "$syms" | grep -v '^sbx_' | grep -v '^LIBSBX_0$' | grep . >/dev/null &&
    fail "libsbx.so exports non-sbx_ symbols: $(echo "$syms" | grep -v '^sbx_' | head -3)"
  echo "$syms" | grep -x 'sbx_sandbox_exec' >/dev/null ||
    fail "sbx_sandbox_exec not exported"

  export PKG_CONFIG_PATH=$stage/usr/lib/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage
  local flags sflags
  flags=$(pkg-config --cflags --libs libsbx) || fail "pkg-config does not know libsbx"
  [[ "$flags" == *"-I$stage/usr/include"* ]] || fail "pkg-config cflags: $flags"
  local san=()
  [ ${#extra[@]} -gt 0 ] && san=(-fsanitize=address,undefined)
  # compiled outside the source tree, so nothing but the installed files can be found
  cp "$SBX_SRC_DIR/docs/examples/hello.c" "$T/hello.c"
  (cd "$T" && cc -std=c17 -Wall -Werror "${san[@]}" hello.c $flags -o hello) || fail "hello.c does not compile (shared)"
  # libsbx.a linked in, its dependencies (Requires.private) shared
  sflags=$(env -u PKG_CONFIG_SYSROOT_DIR pkg-config --libs libcurl jansson libuv)
  (cd "$T" && cc -std=c17 -Wall -Werror "${san[@]}" -I"$stage/usr/include" hello.c \
    "$stage/usr/lib/libsbx.a" $sflags -lm -o hello-static) || fail "hello.c does not link with libsbx.a"

  DAEMON_SHIM='' DAEMON_LOG_LEVEL='' start_daemon
  local out
  out=$(LD_LIBRARY_PATH=$stage/usr/lib "$T/hello" "unix:$SOCK") || fail "hello failed: $out"
  echo "$out"
  [[ "$out" == *"hello from "*", uid 1000"* ]] || fail "no greeting from the sandbox"
  [[ "$out" == *"exit 0 (exited)"* ]] || fail "no exit line"
  [[ "$out" == *"answer.txt: 42"* ]] || fail "file not read back"
  # the shared build really uses the staged library
  LD_LIBRARY_PATH=$stage/usr/lib ldd "$T/hello" | grep "$stage/usr/lib/libsbx.so.0" >/dev/null ||
    fail "hello is not linked against the staged libsbx.so"
  out=$(SBX_HOST="unix:$SOCK" "$T/hello-static") || fail "static hello failed: $out"
  [[ "$out" == *"answer.txt: 42"* ]] || fail "static hello: file not read back"
}

TEST_TIMEOUT_install_and_compile_hello=120

source "$(dirname "$0")/../lib/lib.sh" "$@"
