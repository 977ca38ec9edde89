#!/usr/bin/env bash
# deploy/kubernetes/ and the systemd fleet recipe, checked without a cluster: every YAML file
# parses (python3-yaml), has the kinds it should, and the DaemonSet keeps the properties
# docs/FLEET.md promises (privileged, host cgroupfs and state dir, no memory limit, a priority
# class, readiness on /healthz, its own cgroup subtree, tokens from a Secret, TLS, fleet flags
# the daemon knows).

test_kubernetes_yaml() {
  /usr/bin/python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml is needed (tests/deps.sh)"
  /usr/bin/python3 - "$SBX_SRC_DIR/deploy/kubernetes" "$(bin sandboxd)" <<'PY'
import glob, os, subprocess, sys, yaml
d, daemon = sys.argv[1], sys.argv[2]
docs = {}
for f in sorted(glob.glob(os.path.join(d, "*.yaml"))):
    for doc in yaml.safe_load_all(open(f)):
        if doc is None:
            continue
        assert "apiVersion" in doc and "kind" in doc and "name" in doc["metadata"], (f, doc)
        docs[(doc["kind"], doc["metadata"]["name"])] = doc
need = [("Namespace", "sandboxd"), ("PriorityClass", "sandboxd-node"), ("DaemonSet", "sandboxd"),
        ("Service", "sandboxd"), ("StatefulSet", "etcd"), ("Service", "etcd"),
        ("Secret", "sandboxd-token"), ("Secret", "sandboxd-tls")]
for k in need:
    assert k in docs, f"missing {k}"
ds = docs[("DaemonSet", "sandboxd")]
spec = ds["spec"]["template"]["spec"]
assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
assert docs[("Service", "sandboxd")]["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
assert spec["priorityClassName"] == "sandboxd-node"
c = spec["containers"][0]
assert c["securityContext"]["privileged"] is True
assert "memory" not in c["resources"].get("limits", {}), "no memory limit on the daemon"
probe = " ".join(c["readinessProbe"]["exec"]["command"])
assert "/healthz" in probe, probe
vols = {v["name"]: v for v in spec["volumes"]}
mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
assert vols[mounts["/sys/fs/cgroup"]]["hostPath"]["path"] == "/sys/fs/cgroup"
assert vols[mounts["/var/lib/sandboxd"]]["hostPath"]["path"] == "/var/lib/sandboxd"
assert vols[mounts["/etc/sandboxd/token"]]["secret"]["secretName"] == "sandboxd-token"
assert vols[mounts["/etc/sandboxd/tls"]]["secret"]["secretName"] == "sandboxd-tls"
args = c["command"][1:]
flags = {a.split("=", 1)[0] for a in args}
for f in ["--cgroup-parent", "--tcp", "--tls-cert", "--tls-key", "--fleet-etcd", "--node-name",
          "--advertise-url", "--config"]:
    assert f in flags, f
assert not any(a.startswith(("--token", "--fleet-token")) for a in args), "tokens in argv"
# every flag is one the daemon knows
usage = subprocess.run([daemon, "--help"], capture_output=True, text=True)
text = usage.stdout + usage.stderr
for f in flags:
    assert f in text, f"sandboxd does not know {f}"
tok = docs[("Secret", "sandboxd-token")]["stringData"]["sandboxd.json"]
import json
assert set(json.loads(tok)) == {"token", "fleet_token"}, tok
ss = docs[("StatefulSet", "etcd")]
assert ss["spec"]["serviceName"] == "etcd" and ss["spec"]["replicas"] == 3
print("ok:", len(docs), "objects")
PY
}

test_systemd_fleet_recipe() {
  local f=$SBX_SRC_DIR/deploy/systemd/sandboxd-fleet.json
  jq -e '.fleet_etcd and .advertise_url and .tcp and .tls_cert and .tls_key and .fleet_token' \
    "$f" >/dev/null || fail "the fleet config example lacks a key: $f"
  local k
  for k in $(jq -r 'keys[]' "$f"); do # every key is one the daemon's config knows
    "$(bin sandboxd)" --help 2>&1 | grep -q -- "--${k//_/-}" || fail "unknown config key $k"
  done
  grep -q "^EnvironmentFile=\|^ExecStart=" "$SBX_SRC_DIR/deploy/systemd/sandboxd-fleet.conf" ||
    fail "the drop-in sets nothing"
}

source "$(dirname "$0")/../lib/lib.sh"
