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
mkdir -p "$out/lib" "$out/libexec" "$out/bin"
loader=$(readelf -l "$build/sandboxd" | sed -n 's/.*interpreter: \(.*\)]/\1/p')
cp -L "$loader" "$out/lib/ld.so"
for prog in sandboxd sbx-shim sbx; do
  cp "$build/$prog" "$out/libexec/$prog"
  ldd "$build/$prog" | awk '/=> \//{print $3}' | while read -r lib; do cp -Ln "$lib" "$out/lib/" 2>/dev/null || true; done
  cat >"$out/bin/$prog" <<WRAP
#!/bin/sh
# Runs the bundled $prog with the bundled loader and libraries.
here=\$(cd "\$(dirname "\$0")/.." && pwd)
exec "\$here/lib/ld.so" --library-path "\$here/lib" --argv0 "\$0" "\$here/libexec/$prog" "\$@"
WRAP
  chmod +x "$out/bin/$prog"
done
# sbx-shim loads libarchive only to import an image (dlopen): bundle it and what it needs too.
arch=$(ldconfig -p | awk '/libarchive\.so\.13 /{print $NF; exit}')
if [ -n "$arch" ]; then
  cp -Ln "$arch" "$out/lib/" 2>/dev/null || true
  ldd "$arch" | awk '/=> \//{print $3}' | while read -r lib; do cp -Ln "$lib" "$out/lib/" 2>/dev/null || true; done
fi
echo "bundle: $out ($(du -sh "$out" | cut -f1)); run $out/bin/sandboxd"
