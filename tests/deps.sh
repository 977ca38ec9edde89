#!/usr/bin/env bash
# Installs every Debian 12 package the build, the tests and the demo need, then CRIU 4 (built from
# Debian's source: tests/deps_criu.sh). Idempotent and quiet when everything is already there;
# needs root (it is what `make deps` runs).
set -euo pipefail

PKGS=(
  build-essential pkg-config git curl ca-certificates
  libuv1-dev libmicrohttpd-dev libcurl4-openssl-dev libjansson-dev libseccomp-dev libcap-dev
  libnl-3-dev libnl-route-3-dev libnftables-dev libarchive-dev libssl-dev nettle-dev
  iproute2 nftables procps psmisc util-linux kmod jq
  python3 python3-torch python3-numpy
  python3-pytest python3-requests python3-websockets python3-pip python3-setuptools python3-wheel
  python3-ipykernel python3-jupyter-client nodejs golang-go default-jdk-headless
  clang libclang-rt-14-dev clang-format valgrind
  bubblewrap crun runsc
  debootstrap tmux e2fsprogs
  etcd-server etcd-client openssl python3-yaml
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
install_criu() { bash "$(dirname "$0")/deps_criu.sh"; }
[ ${#missing[@]} -eq 0 ] && { install_criu; exit 0; }

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]}; run 'sudo make deps'" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_criu
