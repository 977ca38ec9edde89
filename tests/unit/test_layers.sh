#!/usr/bin/env bash
# The daemon's dependency rules (docs/ARCHITECTURE.md, "Inside sandboxd") checked on the source:
# the core and the network plumbing never include an API header, the plumbing never includes a
# core header, fleet/ sits beside the core (never included by it) and below the API, policy/
# never installs anything on the calling process, and there is no catch-all daemon.h.

src() { cd "$SBX_SRC_DIR" || fail "no source dir"; }

test_core_never_includes_the_api() {
  src
  local hits
  hits=$(grep -rn '#include "sandboxd/api/' sandboxd/core sandboxd/net || true)
  [ -z "$hits" ] || fail "the core or net includes an API header: $hits"
  hits=$(grep -rn '#include "sandboxd/core/' sandboxd/net || true)
  [ -z "$hits" ] || fail "net/ includes a core header: $hits"
  hits=$(grep -n '#include "sandboxd/[a-z]*/' sandboxd/config.c sandboxd/config.h || true)
  [ -z "$hits" ] || fail "config depends on a daemon layer: $hits"
}

# fleet/ is beside the core and below the API: it calls the core, the core never calls it, and
# it never calls the API.
test_fleet_layer() {
  src
  [ -d sandboxd/fleet ] || fail "no sandboxd/fleet"
  local hits
  hits=$(grep -rn '#include "sandboxd/fleet/' sandboxd/core sandboxd/net || true)
  [ -z "$hits" ] || fail "the core or net includes a fleet header: $hits"
  hits=$(grep -rn '#include "sandboxd/api/' sandboxd/fleet || true)
  [ -z "$hits" ] || fail "fleet/ includes an API header: $hits"
  hits=$(grep -rln 'curl_easy_perform' sandboxd --include='*.c' | grep -v '^sandboxd/fleet/etcd.c$' || true)
  [ -z "$hits" ] || fail "a blocking curl call outside fleet/etcd.c (the fleet thread's): $hits"
}

test_no_catch_all_header() {
  src
  [ ! -e sandboxd/daemon.h ] || fail "sandboxd/daemon.h is back"
  local hits
  hits=$(grep -rn 'sandboxd/daemon.h' sandboxd shim common policy client tests --include='*.[ch]' || true)
  [ -z "$hits" ] || fail "still included: $hits"
}

test_policy_is_pure() {
  src
  local hits
  hits=$(grep -rnE '\b(prctl|SYS_seccomp|seccomp_load|setns|unshare|mount)\s*\(' policy || true)
  [ -z "$hits" ] || fail "policy/ changes the calling process: $hits"
}

# No two files of the daemon call each other's exported sd_* functions both ways (a function
# is exported when it is defined at the start of a line without `static`).
test_no_two_way_calls() {
  src
  local out
  out=$(python3 - <<'PY'
import glob, itertools, re
src = {}
defs = {}
for f in glob.glob("sandboxd/**/*.c", recursive=True):
    s = re.sub(r"/\*.*?\*/", "", open(f).read(), flags=re.S)
    s = re.sub(r'"(\\.|[^"\\])*"', '""', s)
    src[f] = s
    for m in re.finditer(r"^(?!static)[a-z_][\w \*]*?\b(sd_\w+)\s*\(", s, re.M):
        defs[m.group(1)] = f
calls = {f: {d for n, d in defs.items() if d != f and re.search(r"\b" + n + r"\s*\(", s)}
         for f, s in src.items()}
for a, b in itertools.combinations(sorted(src), 2):
    if b in calls[a] and a in calls[b]:
        print(a, "<->", b)
print("files", len(src), "functions", len(defs))
PY
)
  grep -q '<->' <<<"$out" && fail "two-way calls: $out"
  grep -qE 'files [1-9][0-9]+ functions [1-9][0-9]+' <<<"$out" || fail "nothing was read: $out"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
