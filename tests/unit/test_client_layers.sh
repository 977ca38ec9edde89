#!/usr/bin/env bash
# The client's dependency rules checked on the source: the GRPO runner is a client of libsbx
# (no libcurl, no request paths of sandboxd's API, no answers parsed), and the sbx CLI uses the
# public header only. And what they link: sbx and libsbx.so start without libcurl,
# libarchive and OpenSSL (the first two are dlopened when a TCP/TLS endpoint, the async engine
# or `sbx cp` needs them: client/lib/curl_dl.h, client/cli/archive_dl.h).

src() { cd "$SBX_SRC_DIR" || fail "no source dir"; }

test_runner_only_uses_libsbx() {
  src
  local hits
  hits=$(grep -rn 'curl_\|<curl/' client/grpo || true)
  [ -z "$hits" ] || fail "the runner calls libcurl: $hits"
  hits=$(grep -rn '/v1/sandboxes\|/v1/leases\|/v1/info' client/grpo || true)
  [ -z "$hits" ] || fail "the runner builds sandboxd requests itself: $hits"
  # (the runner's C code: client/grpo/grading/ is the graders' library, which runs inside
  # grading sandboxes and reads sbx-as-agent's record, not sandboxd's answers)
  hits=$(grep -rnE --include='*.[ch]' '"(exit_code|stdout|stderr|free_slots|forked_from|end)"' client/grpo || true)
  [ -z "$hits" ] || fail "the runner reads sandboxd's answers itself: $hits"
}

test_cli_uses_the_public_header() {
  src
  local hits
  hits=$(grep -rn '#include "' client/cli | grep -v '"client/cli/' || true)
  [ -z "$hits" ] || fail "the CLI includes more than its own and the public headers: $hits"
}

test_cli_links_neither_libcurl_nor_libarchive() {
  local f needed
  for f in sbx libsbx.so.0; do
    [ -f "$SBX_BUILD_DIR/$f" ] || fail "$SBX_BUILD_DIR/$f is missing"
    needed=$(readelf -d "$SBX_BUILD_DIR/$f" | grep NEEDED) || fail "readelf failed on $f"
    echo "$needed" | grep -q 'libc\.so' || fail "$f: no NEEDED entries read: $needed"
    if echo "$needed" | grep -E 'libcurl|libarchive'; then
      fail "$f links libcurl or libarchive directly (call them through curl_dl.h/archive_dl.h)"
    fi
    # OpenSSL's libcrypto alone costs ~2 ms of relocations at every start (the WebSocket
    # handshake's SHA-1 comes from nettle, its randomness from getrandom)
    if echo "$needed" | grep -E 'libcrypto|libssl'; then
      fail "$f links OpenSSL"
    fi
  done
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
