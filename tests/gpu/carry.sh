#!/usr/bin/env bash
# Prepares .devcarry/ (git-ignored) for a run on a device machine (tests/gpu/device.sh there):
# make static's bundle as a tar.xz (the bundle is over the device tool's 64 MiB carry limit,
# xz makes it ~19 MiB), and a build directory of the cgroup v2 subset: the Debian-built test
# programs and sandboxd/sbx/sbx-shim wrappers, each started through the bundle's loader and
# libraries, plus jq (the shell suites' JSON tool) the same way. The device machine has no
# package registry and another distribution, so nothing of this machine's /usr is needed there.
# Usage: tests/gpu/carry.sh [BUILD_DIR]   (then carry ".devcarry"; the device runs
#        tests/gpu/device.sh)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$SRC"
B=${1:-build}
make -s -j"$(nproc)" B="$B" >/dev/null
make -s static B="$B" >/dev/null
C=.devcarry V=.devcarry/v2
rm -rf "$C" && mkdir -p "$V/real" "$V/tests/integration" "$V/bin" "$V/jqlib"
tar cJf "$C/bundle.tar.xz" build-static
loader_wrap() { # FILE REAL: FILE runs REAL (relative to the v2 dir) through the bundle's loader
  cat >"$1" <<WRAP
#!/bin/sh
# device run: a Debian-built program through the bundle's loader and libraries
v=\$(cd "\$(dirname "\$0")" && while [ ! -d real ]; do cd ..; done && pwd); b=\$(cd "\$v/../../build-static" && pwd)
exec "\$b/lib/ld.so" --library-path "\$b/lib:\$v/jqlib" "\$v/$2" "\$@"
WRAP
  chmod +x "$1"
}
for t in test_gpu_devbpf test_seccomp_filter test_shim_basic test_shim_exec test_shim_image \
  test_shim_isolation test_shim_lifecycle test_shim_limits test_client test_client_process; do
  cp "$B/tests/integration/$t" "$V/real/"
  loader_wrap "$V/tests/integration/$t" "real/$t"
done
for p in sandboxd sbx; do printf '#!/bin/sh\nexec "$(cd "$(dirname "$0")/../../build-static" && pwd)/bin/%s" "$@"\n' "$p" >"$V/$p"; done
printf '#!/bin/sh\nexec "$(cd "$(dirname "$0")/../../build-static" && pwd)/libexec/sandboxd/sbx-shim" "$@"\n' >"$V/sbx-shim"
chmod +x "$V/sandboxd" "$V/sbx" "$V/sbx-shim"
cp "$B/sbx-as-agent" "$V/"
cp "$(command -v jq)" "$V/real/jq"
ldd "$(command -v jq)" | awk '/=> \//{print $3}' | while read -r l; do cp -Ln "$l" "$V/jqlib/"; done
loader_wrap "$V/bin/jq" real/jq
echo "carry.sh: $(du -sh "$C" | cut -f1) in $C; carry [\"$C\"] and run tests/gpu/device.sh"
