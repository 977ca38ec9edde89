#!/usr/bin/env python3
"""Builds a rootfs tarball (what `tar -C rootfs .` makes) holding the host's python3, just the
standard library modules SERVER imports, the libraries they need, and SERVER as /srv/env.py:
an OpenEnv-style environment image for test_openenv.sh and the GRPO server-env case.

mkenvimage.py OUT.tar SERVER.py
"""
import importlib.util
import os
import subprocess
import sys
import sysconfig
import tarfile


def needed_files(server):
    spec = importlib.util.spec_from_file_location("envserver", server)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports what it needs; serves only under __main__
    import encodings.idna, encodings.latin_1, encodings.utf_8, site  # noqa: F401 (start-up)
    files = {os.path.realpath(sys.executable)}
    mine = {os.path.realpath(__file__), os.path.realpath(server)}
    for m in list(sys.modules.values()):
        f = getattr(m, "__file__", None)
        if f and os.path.exists(f) and os.path.realpath(f) not in mine:
            files.add(f)
    stdlib = sysconfig.get_paths()["stdlib"]
    files.add(os.path.join(stdlib, "os.py"))  # the landmark python's prefix search looks for
    for f in os.listdir(os.path.join(stdlib, "encodings")):
        if f.endswith(".py"):
            files.add(os.path.join(stdlib, "encodings", f))
    libs = set()
    for f in [x for x in files if x.endswith(".so") or x == os.path.realpath(sys.executable)]:
        out = subprocess.run(["ldd", f], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            p = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
            if p.startswith("/"):
                libs.add(p)
    return files, libs


def main():
    out, server = sys.argv[1], sys.argv[2]
    files, libs = needed_files(server)
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as t:
        dirs = set()

        def add(arc, src, mode=None):
            parts = arc.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    ti = tarfile.TarInfo(d)
                    ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                    t.addfile(ti)
            ti = t.gettarinfo(src, arc)
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = "root"
            ti.type = tarfile.REGTYPE
            ti.mode = mode or (ti.mode & 0o755)
            ti.size = os.path.getsize(src)
            with open(src, "rb") as f:
                t.addfile(ti, f)

        for f in sorted(files):
            add(f.lstrip("/"), f)
        add("usr/bin/python3", os.path.realpath(sys.executable), 0o755)
        for lib in sorted(libs):  # under /usr (the image's /lib may be a link in Debian's host)
            real = lib if not lib.startswith("/lib") else "/usr" + lib
            add(real.lstrip("/"), os.path.realpath(lib), 0o755)
        add("srv/env.py", server, 0o644)
        for d in ("tmp",):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o1777
            t.addfile(ti)
        for name, target in (("lib", "usr/lib"), ("lib64", "usr/lib64"), ("bin", "usr/bin")):
            ti = tarfile.TarInfo(name)
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            t.addfile(ti)


if __name__ == "__main__":
    main()
