# Shell test framework: a test script defines functions named test_*; `script --list` prints
# "name timeout_s [pass]" for each, `script NAME` runs one. Source this file at the END of the
# script. TEST_PASS_<name>=plain (or sanitized): a slow case that runs in that build's pass
# only (tests/run, tests/README.md).
# Helpers: fail MSG, skip MSG (exit 77, loud), assert_eq A B MSG, bin NAME (a built binary).
# Daemons: tests/lib/daemon.sh (source it first). How cases run: tests/README.md.

SBX_BUILD_DIR=${SBX_BUILD_DIR:-build}
SBX_SRC_DIR=${SBX_SRC_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP (prerequisite missing): $*" >&2; exit 77; }
assert_eq() { [ "$1" == "$2" ] || fail "${3:-assert_eq}: expected '$2', got '$1'"; }
bin() { echo "$SBX_BUILD_DIR/$1"; }
require_root() { [ "$(id -u)" -eq 0 ] || skip "needs root"; }

# The environment that lets python load an ASan-built libsbx (build-san): the ASan runtime
# preloaded, and no leak check of python's own allocations (they are not ours to check). Empty
# for a plain build. Use as `env $(asan_env) ... python3 ...`.
asan_env() {
  local syms
  syms=$(nm -D "$SBX_BUILD_DIR/libsbx.so.0" 2>/dev/null || true)
  if [[ "$syms" == *__asan_init* ]]; then
    echo "LD_PRELOAD=$(cc -print-file-name=libasan.so) ASAN_OPTIONS=detect_leaks=0"
  fi
}

# Per-case timeouts: a script may set TEST_TIMEOUT_<name>=seconds (default 60).
if [ "${1:-}" == "--list" ]; then
  for f in $(declare -F | awk '{print $3}' | grep '^test_'); do
    t="TEST_TIMEOUT_${f#test_}" p="TEST_PASS_${f#test_}"
    echo "${f#test_} ${!t:-60} ${!p:-}"
  done
  exit 0
elif [ -n "${1:-}" ]; then
  set -Eeuo pipefail
  # A command that fails where errexit applies ends the case: say which, or the log is empty
  # (a race that makes `x=$(find ...)` fail once in a thousand runs showed only "rc=1"). The
  # trap is inherited (-E) by command substitutions too, where bash clears errexit: silent there.
  trap 'sbx_err=$?; [[ $- != *e* ]] || echo "FAIL: status $sbx_err from \`$BASH_COMMAND\` (${BASH_SOURCE[0]##*/}:$LINENO)" >&2' ERR
  # A timeout's SIGTERM comes twice (to the case, then to its group). With only an EXIT trap,
  # bash dies of the second one when it lands as the first one's EXIT trap begins, before that
  # trap can ignore it (tests/integration/test_runner.sh). Trapped, the second one waits.
  trap 'trap "" TERM INT; exit 143' TERM
  trap 'trap "" TERM INT; exit 130' INT
  declare -F "test_$1" >/dev/null || { echo "no such test case: $1" >&2; exit 2; }
  "test_$1"
  exit 0
fi
