#!/usr/bin/env bash
# `make static`: a self-contained, relocatable bundle of sandboxd, sbx-shim and sbx for hosts that
# lack the shared libraries (e.g. a GPU host). Debian 12 ships no static libcurl dependencies
# (nghttp2, ssh2, krb5, ...) and no static libnftables, so a fully static link is impossible with
# distribution packages; instead each program is copied with every shared library it loads and
# the dynamic loader, and started through a small wrapper that runs the bundled loader with the
# bundled library path. Nothing outside the bundle is read.
# Usage: build-aux/bundle.sh BUILD_DIR OUT_DIR
set -euo pipefail
build=$1 out=$2
rm -rf "$out"
mkdir -p "$out/lib" "$out/libexec/real" "$out/libexec/sandboxd" "$out/bin"
loader=$(readelf -l "$build/sandboxd" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
cp -L "$loader" "$out/lib/ld.so"

# wrapper PATH PROG: a script at PATH that runs libexec/real/PROG through the bundled loader.
# sandboxd looks for the shim at <its exe's dir>/../libexec/sandboxd/sbx-shim; its exe is the
# bundled lib/ld.so, so the shim's wrapper lives there.
wrapper() {
  local up=$1 path=$2 prog=$3
  cat >"$path" <<WRAP
#!/bin/sh
# Runs the bundled $prog with the bundled loader and libraries.
here=\$(cd "\$(dirname "\$0")/$up" && pwd)
exec "\$here/lib/ld.so" --library-path "\$here/lib" --argv0 "\$0" "\$here/libexec/real/$prog" "\$@"
WRAP
  chmod +x "$path"
}
for prog in sandboxd sbx-shim sbx; do
  cp "$build/$prog" "$out/libexec/real/$prog"
  ldd "$build/$prog" | awk '/=> \//{print $3}' | while read -r lib; do cp -Ln "$lib" "$out/lib/" 2>/dev/null || true; done
done
wrapper .. "$out/bin/sandboxd" sandboxd
wrapper .. "$out/bin/sbx" sbx
if readelf -l "$build/sbx-shim" | grep -q 'interpreter:'; then
  wrapper ../.. "$out/libexec/sandboxd/sbx-shim" sbx-shim
else # static (the default build): it runs as it is
  cp "$build/sbx-shim" "$out/libexec/sandboxd/sbx-shim"
  rm "$out/libexec/real/sbx-shim"
fi
# sbx-as-agent (static) is found next to the shim's executable, which under the bundled loader
# is lib/ld.so (a dynamic shim): it goes there and next to the shim.
cp "$build/sbx-as-agent" "$out/libexec/sandboxd/sbx-as-agent"
cp "$build/sbx-as-agent" "$out/lib/sbx-as-agent"
cp "$build/sbx-gvisor-init" "$out/libexec/sandboxd/sbx-gvisor-init" # the same for gVisor's runner
cp "$build/sbx-gvisor-init" "$out/lib/sbx-gvisor-init"
cp "$build/sbx-gvisor-statx.so" "$out/libexec/sandboxd/sbx-gvisor-statx.so"
cp "$build/sbx-gvisor-statx.so" "$out/lib/sbx-gvisor-statx.so"
# sandboxd loads libarchive only to import an image (dlopen): bundle it and what it needs too.
arch=$(ldconfig -p | awk '/libarchive\.so\.13 /{p=$NF} END{print p}')
if [ -n "$arch" ]; then
  cp -Ln "$arch" "$out/lib/" 2>/dev/null || true
  ldd "$arch" | awk '/=> \//{print $3}' | while read -r lib; do cp -Ln "$lib" "$out/lib/" 2>/dev/null || true; done
fi
echo "bundle: $out ($(du -sh "$out" | cut -f1)); run $out/bin/sandboxd"
