#!/usr/bin/env bash
# CRIU for pause to disk (docs/API.md "Pause and resume"), run by tests/deps.sh. Debian 12's
# criu (3.17) cannot start on newer kernels (its vDSO parser: "Unexpected rt vDSO area bounds"
# on 6.18), and Debian 13's 4.1.1 hangs in every dump on 6.18.44 (its parasite never traps at
# the end of its rt_sigreturn: "Waiting for PID to trap"), so this builds CRIU 4.2.1, the
# version Debian unstable ships, from Debian's own source package (the upstream tarball in
# Debian's pool, its SHA-256 checked) with Debian 12's build dependencies, and installs the one
# binary it needs as /usr/local/sbin/criu (before /usr/sbin on every PATH the daemon uses).
# Our patches to it (tests/criu/*.patch, each says why) are applied before the build; a stamp
# (/usr/local/share/sandboxd/criu.stamp) names the version and the patches' checksum.
# Idempotent: nothing happens when the stamp matches.
# The Debian mirror is apt's own (the first URI of its debian sources).
set -euo pipefail

VERSION=4.2.1
SHA256=29ec0ee09e296479fe7048c80980e8ef1d0684d0b0204c2b101dfea19f6725b9
# a mirror without unstable's pool: Debian 13's 4.1.1 (it works on kernels before 6.18.44)
FALLBACK=(4.1.1 f80a66cb3726bb2116266d4759ce3bcbfab7abdb6b6d430bf20dd41911717afe)
DEST=/usr/local/sbin/criu
# (libprotobuf-dev: descriptor.proto, only a Recommends of protobuf-compiler)
BUILD_DEPS=(libprotobuf-c-dev protobuf-c-compiler protobuf-compiler libprotobuf-dev python3-protobuf
  libnl-3-dev libnet1-dev libcap-dev libbsd-dev libgnutls28-dev libnftables-dev uuid-dev pkg-config
  build-essential patch curl ca-certificates xz-utils)

PATCHES=$(cd "$(dirname "$0")/criu" && pwd)
STAMP=/usr/local/share/sandboxd/criu.stamp
stamp() { echo "$VERSION $(cat "$PATCHES"/*.patch | sha256sum | cut -d' ' -f1)"; }
if [ -x "$DEST" ] && "$DEST" --version 2>/dev/null | grep -q "^Version: $VERSION\$" &&
  [ "$(cat "$STAMP" 2>/dev/null)" == "$(stamp)" ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "deps: CRIU $VERSION is missing; run 'sudo make deps'" >&2
  exit 1
fi

mirror() {
  local uri
  uri=$(grep -hoE '^(URIs:|deb)( +\[[^]]*\])? +https?://[^ ]+/debian/?( |$)' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -1 |
    sed -E 's/^.* (https?:)/\1/; s/ *$//; s#/$##') || true
  echo "${uri:-http://deb.debian.org/debian}"
}

missing=()
for p in "${BUILD_DEPS[@]}"; do
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed$' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing CRIU's build dependencies: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null
fi

work=$(mktemp -d /tmp/criu-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
url="$(mirror)/pool/main/c/criu/criu_$VERSION.orig.tar.xz"
if ! curl -fsSL --retry 3 -o "$work/criu.tar.xz" "$url"; then
  echo "deps: $url is not on this mirror; CRIU ${FALLBACK[0]} instead" >&2
  VERSION=${FALLBACK[0]} SHA256=${FALLBACK[1]}
  url="$(mirror)/pool/main/c/criu/criu_$VERSION.orig.tar.xz"
  curl -fsSL --retry 3 -o "$work/criu.tar.xz" "$url"
fi
echo "deps: building CRIU $VERSION from $url"
echo "$SHA256  $work/criu.tar.xz" | sha256sum -c --quiet
tar -C "$work" -xJf "$work/criu.tar.xz"
for p in "$PATCHES"/*.patch; do
  patch -d "$work/criu-$VERSION" -p1 --forward --quiet <"$p" || { echo "deps: $p does not apply" >&2; exit 1; }
done
make -C "$work/criu-$VERSION" -j"$(nproc)" criu >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; exit 1; }
install -m 0755 "$work/criu-$VERSION/criu/criu" "$DEST"
mkdir -p "$(dirname "$STAMP")" && stamp >"$STAMP"
"$DEST" --version | head -1
