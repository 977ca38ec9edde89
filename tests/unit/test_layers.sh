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
  # another node's API only through libsbx, and only from fleet/move.c's worker threads
  hits=$(grep -rln '#include "client/' sandboxd | grep -v '^sandboxd/fleet/move.c$' || true)
  [ -z "$hits" ] || fail "the daemon calls libsbx outside fleet/move.c: $hits"
  grep -q 'uv_queue_work' sandboxd/fleet/move.c || fail "fleet/move.c's libsbx calls are not on worker threads"
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

# No circle between the files of one folder (docs/ARCHITECTURE.md, "Rooms"): from `nm` of each
# object file of the build, a file uses another when it leaves undefined a global symbol the
# other defines; the file graph of each folder must have no strongly connected component of more
# than one file. A circle is printed with the symbols that close it. Objects whose source is gone
# (stale after a move) are left out.
TEST_PASS_no_circle_in_a_folder=plain TEST_TIMEOUT_no_circle_in_a_folder=180 # (15-30 s of nm: once)
test_no_circle_in_a_folder() {
  src
  command -v nm >/dev/null || skip "no nm (binutils)"
  [ -d "$SBX_BUILD_DIR/obj" ] || fail "no $SBX_BUILD_DIR/obj (build first)"
  local out rc=0
  out=$(python3 - "$SBX_BUILD_DIR/obj" <<'PY'
import os, subprocess, sys
from collections import defaultdict
objdir = sys.argv[1]
folders = defaultdict(dict)  # folder -> file -> (defs, undefs)
for root, _, files in os.walk(objdir):
    for f in files:
        if not f.endswith(".o"):
            continue
        p = os.path.join(root, f)
        rel = os.path.relpath(p, objdir)
        if not os.path.exists(rel[:-2] + ".c"):
            continue  # a stale object whose source was moved or removed
        out = subprocess.run(["nm", p], capture_output=True, text=True, check=True).stdout
        d, u = set(), set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] == "U":
                u.add(parts[1])
            elif len(parts) == 3 and parts[1] in "TDBRGSVW":
                d.add(parts[2])
        folders[os.path.dirname(rel)][rel[:-2] + ".c"] = (d, u)
nfiles = 0
bad = []
for folder, fs in sorted(folders.items()):
    owner = {}
    for f, (d, _) in fs.items():
        for s in d:
            owner[s] = f
    edges = defaultdict(set)
    for f, (_, u) in fs.items():
        nfiles += 1
        for s in u:
            o = owner.get(s)
            if o and o != f:
                edges[f].add((o, s))
    # Tarjan
    idx, low, st, on, comps = {}, {}, [], set(), []
    n = [0]
    def sc(v):
        idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
        for w, _ in edges[v]:
            if w not in idx:
                sc(w); low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], idx[w])
        if low[v] == idx[v]:
            c = []
            while True:
                w = st.pop(); on.discard(w); c.append(w)
                if w == v: break
            comps.append(c)
    sys.setrecursionlimit(10000)
    for v in sorted(fs):
        if v not in idx:
            sc(v)
    for c in comps:
        if len(c) > 1:
            cs = set(c)
            lines = [f"circle in {folder}: " + " ".join(sorted(c))]
            for a in sorted(c):
                for b, s in sorted(edges[a]):
                    if b in cs:
                        lines.append(f"  {a} -> {b} ({s})")
            bad.append("\n".join(lines))
for b in bad:
    print(b)
print("folders", len(folders), "files", nfiles)
sys.exit(1 if bad else 0)
PY
) || rc=$?
  [ "$rc" -eq 0 ] || fail "$out"
  grep -qE 'folders [1-9][0-9]* files [1-9][0-9]+$' <<<"$out" || fail "nothing was read: $out"
}

# No source file (C, Python, shell) over 800 lines: a longer one is split into rooms.
test_no_file_over_800_lines() {
  src
  local long
  long=$(find . -path './build*' -prune -o \( -name '*.[ch]' -o -name '*.py' -o -name '*.sh' \) -print0 |
    xargs -0 wc -l | awk '$2 != "total" && $1 > 800 {print $2 " (" $1 " lines)"}')
  [ -z "$long" ] || fail "files over 800 lines: $long"
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
