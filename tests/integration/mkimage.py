#!/usr/bin/env python3
"""Builds test image archives with tarfile (no registry, no network) for test_images.sh.

mkimage.py FORMAT OUT [BAD]
  FORMAT: docker (classic docker save), docker-oci (docker save >= 25: OCI blobs plus
          manifest.json), oci (OCI image layout, second layer gzip), rootfs (one plain tarball)
  BAD:    one hostile or broken variant (see BAD_LAYERS, BAD_ENV and the digest cases below), or
          good layers on top (GOOD_LAYERS, GOOD_TWO)

The image: layer 1 is a tiny runnable root (dash as /usr/bin/sh, a few coreutils and the
libraries they need, copied from the host) with files that layer 2 changes, deletes with a
whiteout and hides with an opaque directory; layer 2 also adds symlinks, a hard link and
/app (the WorkingDir, owned by 1000). Config: Env and WorkingDir.
"""
import gzip
import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tarfile

BINS = ["sh", "cat", "stat", "ls", "id", "touch", "rm", "mkdir", "du", "true"]
BINS += os.environ.get("MKIMAGE_EXTRA_BINS", "").split()  # a test's own tools (test_commit.sh)
# host programs whose shared libraries (not the programs) go in too: tests/gpu/run.sh's
# nvidia-smi, which the daemon binds into a GPU sandbox's image
LIBS_OF = os.environ.get("MKIMAGE_LIBS_OF", "").split()
# MKIMAGE_LIB64=1: every library in usr/lib64 (a RHEL-like layout, no Debian multiarch directory)
LIB64 = os.environ.get("MKIMAGE_LIB64") == "1"


def host_files():
    """(archive path, host path) of the binaries and their shared libraries."""
    out, libs = [], set()
    for b in BINS + LIBS_OF:
        src = "/usr/bin/dash" if b == "sh" else f"/usr/bin/{b}"
        if b in LIBS_OF:
            src = b
        elif not os.path.exists(src):
            src = f"/bin/{b}"
        if b not in LIBS_OF:
            out.append((f"usr/bin/{b}", src))
        ldd = subprocess.run(["ldd", src], capture_output=True, text=True).stdout
        for line in ldd.splitlines():
            parts = line.split()
            path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
            if path.startswith("/"):
                libs.add(os.path.realpath(path) if False else path)
    for lib in sorted(libs):
        real = lib if not lib.startswith("/lib") else "/usr" + lib
        if LIB64:
            real = "/usr/lib64/" + os.path.basename(lib)
        out.append((real.lstrip("/"), lib))
    return out


class Layer:
    def __init__(self):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)
        self.dirs = set()

    def _info(self, name, kind, mode, uid=0, gid=0):
        t = tarfile.TarInfo(name)
        t.type, t.mode, t.uid, t.gid, t.mtime = kind, mode, uid, gid, 1700000000
        return t

    def parents(self, name):
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in self.dirs and not d.startswith(("/", "..")):
                self.dir(d)

    def dir(self, name, mode=0o755, uid=0, gid=0):
        self.dirs.add(name)
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode, uid, gid))

    def file(self, name, data, mode=0o644, uid=0, gid=0, parents=True):
        if parents:
            self.parents(name)
        data = data.encode() if isinstance(data, str) else data
        t = self._info(name, tarfile.REGTYPE, mode, uid, gid)
        t.size = len(data)
        self.tar.addfile(t, io.BytesIO(data))

    def link(self, name, kind, target, parents=True):
        if parents:
            self.parents(name)
        t = self._info(name, kind, 0o777 if kind == tarfile.SYMTYPE else 0o644)
        t.linkname = target
        self.tar.addfile(t)

    def node(self, name, kind):
        t = self._info(name, kind, 0o644)
        t.devmajor, t.devminor = 1, 3
        self.tar.addfile(t)

    def bytes(self):
        self.tar.close()
        return self.buf.getvalue()


def layer1():
    l = Layer()
    for d in ["usr", "usr/bin", "usr/lib", "usr/lib64", "etc", "tmp", "data", "opq", "opq/sub"]:
        l.dir(d)
    l.link("bin", tarfile.SYMTYPE, "usr/bin")
    l.link("lib", tarfile.SYMTYPE, "usr/lib")
    l.link("lib64", tarfile.SYMTYPE, "usr/lib64")
    for arc, host in host_files():
        with open(host, "rb") as f:
            l.file(arc, f.read(), mode=0o755)
    l.file("etc/base.txt", "base\n")
    l.file("data/keep", "keep\n")
    l.file("data/gone", "gone\n")
    l.file("opq/old1", "old1\n")
    l.file("opq/sub/old2", "old2\n")
    l.dir("home", 0o755)
    l.dir("home/user", 0o750, 1000, 1000)
    l.file("home/user/notes", "mine\n", 0o600, 1000, 1000)
    l.dir("rootonly", 0o700)
    l.file("srv/mode640", "640\n", 0o640, 0, 1000)
    return l.bytes()


def layer2():
    l = Layer()
    l.dirs.update(["etc", "data", "opq", "usr", "usr/bin"])
    l.dir("etc")
    l.file("etc/base.txt", "changed\n")
    l.dir("data")
    l.file("data/.wh.gone", "")
    l.file("data/keep2", "keep2\n")
    l.link("data/hard", tarfile.LNKTYPE, "data/keep2")
    l.dir("opq")
    l.file("opq/.wh..wh..opq", "")
    l.file("opq/new", "new\n")
    l.link("usr/bin/cat2", tarfile.SYMTYPE, "cat")
    l.link("abs-link", tarfile.SYMTYPE, "/etc/base.txt")
    l.dir("app", 0o755, 1000, 1000)
    l.file("app/README", "app\n", 0o644, 1000, 1000)
    if os.environ.get("MKIMAGE_APP_SUB") == "1":  # a directory the sandbox user can replace
        l.dir("app/sub", 0o755, 1000, 1000)
        l.file("app/sub/s", "s\n", 0o644, 1000, 1000)
    return l.bytes()


BAD_LAYERS = {
    "abs": lambda l: l.file("/etc/evil", "x", parents=False),
    "dotdot": lambda l: l.file("../evil", "x", parents=False),
    "device": lambda l: l.node("dev-null", tarfile.CHRTYPE),
    "fifo": lambda l: l.node("fifo", tarfile.FIFOTYPE),
    "setuid": lambda l: l.file("usr/bin/su", "x", mode=0o4755),
    "hardlink-out": lambda l: l.link("h", tarfile.LNKTYPE, "../../etc/passwd"),
    "hardlink-missing": lambda l: l.link("h", tarfile.LNKTYPE, "etc/shadow"),
    "symlink-out": lambda l: l.link("a/b", tarfile.SYMTYPE, "../../../etc"),
    "through-symlink": lambda l: (l.link("lnk", tarfile.SYMTYPE, "/tmp"),
                                  l.file("lnk/evil", "x", parents=False)),
    "long-name": lambda l: l.file("srv/" + "n" * 256, "x"),  # over NAME_MAX
    "long-link": lambda l: l.link("srv/l", tarfile.SYMTYPE, "d/" * 2100),  # over PATH_MAX
    "long-path": lambda l: l.file("p/" * 2100 + "f", "x", parents=False),
}

# a third layer that is no error: whiteouts beside their own layer's entries of the same name,
# which they leave (OCI layer.md: a whiteout applies to the lower layers only)
GOOD_LAYERS = {
    "same-layer-whiteouts": lambda l: (
        l.file(".wh.opq", ""), l.dir("opq"), l.file("opq/fresh", "fresh\n"),  # opq recreated
        l.file("data/keep3", "k3\n"), l.file("data/.wh.keep3", ""),  # a file, then its whiteout
        l.file("data/sub/s", "s\n"), l.file("data/.wh.sub", "")),  # a directory, then its whiteout
    # AUFS's metadata at the root, as docker on aufs left it in layers (docker skips it): its
    # hard-link directory with a file, its own file, the orphans' directory (named with "./")
    "aufs-meta": lambda l: (
        l.dir(".wh..wh.plnk", 0o700), l.file(".wh..wh.plnk/1234.5678", "linked\n"),
        l.file(".wh..wh.aufs", ""), l.dir("./.wh..wh.orph", 0o700),
        l.file(".wh..wh.orph/o", "orphan\n"), l.file("data/aufs", "aufs\n")),
    # the WorkingDir /tmp deleted (the sandbox's own /tmp is there all the same), or below
    # /workspace (the sandbox's own empty /workspace hides it)
    "workdir-tmp": lambda l: l.file(".wh.tmp", ""),
    "workdir-in-workspace": lambda l: l.dir("workspace/app"),
    # the WorkingDir below /dev or /proc (the sandbox's own /dev and /proc hide it)
    "workdir-in-dev": lambda l: l.dir("dev/app"),
    "workdir-in-proc": lambda l: l.dir("proc/app"),
}
# two good layers on top: the WorkingDir w/s/deep (the fourth), hidden by the opaque w/ that
# the fifth has (with only its own w/s/)
GOOD_TWO = {
    "workdir-hidden": (lambda l: l.dir("w/s/deep"),
                       lambda l: (l.dir("w"), l.file("w/.wh..wh..opq", ""), l.dir("w/s"))),
    # the WorkingDir /wl/deep through symlinks of the third layer (wl -> srv/wdl, relative;
    # srv/wdl -> /srv/../srv/wd, absolute) into the fourth's directory srv/wd/deep
    "workdir-link": (lambda l: (l.link("wl", tarfile.SYMTYPE, "srv/wdl"),
                                l.link("srv/wdl", tarfile.SYMTYPE, "/srv/../srv/wd")),
                     lambda l: l.dir("srv/wd/deep")),
    # and through a loop of symlinks (wl -> wm -> wl): none
    "workdir-loop": (lambda l: (l.link("wl", tarfile.SYMTYPE, "wm"),
                                l.link("wm", tarfile.SYMTYPE, "/wl")),
                     lambda l: l.dir("srv/wd/deep")),
}
WORKDIR = {"workdir-hidden": "/w/s/deep", "workdir-link": "/wl/deep", "workdir-loop": "/wl/deep",
           "workdir-workspace": "/workspace", "workdir-tmp": "/tmp",
           "workdir-in-workspace": "/workspace/app", "workdir-proc": "/proc",
           "workdir-dev-pts": "/dev/pts", "workdir-in-dev": "/dev/app",
           "workdir-in-proc": "/proc/app", "workdir-app-sub": "/app/sub"}


HOST_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), "unknown")


def sha(b):
    return hashlib.sha256(b).hexdigest()


# config Env beyond a create's env bounds (policy/limits.h), each refused at import: what goes
# with every command of the image's sandboxes must fit the command's request
BAD_ENV = {
    "env-key": ["K" * 257 + "=v"],  # a name of 257 characters
    "env-many": ["V%d=v" % i for i in range(257)],  # 257 entries
    "env-value": ["BIG=" + "v" * 32769],  # a value over 32 KiB
    "env-big": ["V%d=%s" % (i, "v" * 30000) for i in range(3)],  # over 64 KiB in all
    "env-noeq": ["NOEQUALS"],
}
# and at those bounds, taken: a name of 256 characters (reaches every command)
EDGE_ENV = {"env-256": ["K" * 256 + "=at-the-bound"]}


def config(diff_ids, bad=""):
    env = ["PATH=/usr/local/bin:/usr/bin:/bin", "IMG_VAR=from-image", "OVERRIDE=image"]
    return json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Env": env + BAD_ENV.get(bad, []) + EDGE_ENV.get(bad, []),
                   "WorkingDir": WORKDIR.get(bad, "/app"), "Cmd": ["sh"]},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + d for d in diff_ids]},
    }).encode()


def add(tar, name, data):
    t = tarfile.TarInfo(name)
    t.size, t.mode, t.mtime = len(data), 0o644, 1700000000
    tar.addfile(t, io.BytesIO(data))


def build(fmt, out, bad):
    layers = [layer1(), layer2()]
    if bad in BAD_LAYERS or bad in GOOD_LAYERS:
        l = Layer()
        (BAD_LAYERS.get(bad) or GOOD_LAYERS[bad])(l)
        layers.append(l.bytes())
    for make in GOOD_TWO.get(bad, ()):
        l = Layer()
        make(l)
        layers.append(l.bytes())
    diff_ids = [sha(x) for x in layers]
    if bad == "diffid":
        diff_ids[1] = sha(b"something else")
    if fmt == "rootfs":
        with open(out, "wb") as f:
            f.write(layers[-1] if bad in BAD_LAYERS else layers[0])
        return
    blobs = list(layers)
    if fmt == "oci":
        blobs[1] = gzip.compress(layers[1], mtime=0)
    cfg = config(diff_ids, bad)
    with tarfile.open(out, "w") as tar:
        if fmt == "docker":
            paths = []
            for i, b in enumerate(blobs):
                lid = sha(b"v1-%d" % i + b)
                add(tar, f"{lid}/VERSION", b"1.0")
                add(tar, f"{lid}/json", json.dumps({"id": lid}).encode())
                add(tar, f"{lid}/layer.tar", b)
                paths.append(f"{lid}/layer.tar")
            name = sha(cfg) if bad != "config-digest" else sha(b"x")
            add(tar, f"{name}.json", cfg)
            if bad == "manifest-appended":  # replaced by a later copy (tar -rf): the last counts
                add(tar, "manifest.json", b'[{"Config":"nowhere.json","Layers":[]}]')
            add(tar, "manifest.json", json.dumps(
                [{"Config": f"{name}.json", "RepoTags": ["test:v1"], "Layers": paths}]).encode())
            add(tar, "repositories", b'{"test":{"v1":"%s"}}' % sha(cfg).encode())
            return
        gz = "application/vnd.oci.image.layer.v1.tar+gzip"
        descs = [{"mediaType": gz if fmt == "oci" and i == 1 else
                  "application/vnd.oci.image.layer.v1.tar",
                  "digest": "sha256:" + sha(b), "size": len(b)} for i, b in enumerate(blobs)]
        if bad == "blob-digest":  # same size, other content
            blobs[0] = bytes([blobs[0][0] ^ 1]) + blobs[0][1:]
        man = json.dumps({"schemaVersion": 2,
                          "mediaType": "application/vnd.oci.image.manifest.v1+json",
                          "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                     "digest": "sha256:" + sha(cfg), "size": len(cfg)},
                          "layers": descs}).encode()
        add(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        entry = {"mediaType": "application/vnd.oci.image.manifest.v1+json",
                 "digest": "sha256:" + sha(man), "size": len(man),
                 "annotations": {"org.opencontainers.image.ref.name": "v1"}}
        # an index of other platforms only (refused), or with this host's second (taken)
        arches = {"other-arch": ["arm64", "s390x"], "multi-arch": ["s390x", HOST_ARCH]}
        entries = [dict(entry, platform={"os": "linux", "architecture": a})
                   for a in arches.get(bad, [])] or [entry]
        add(tar, "index.json", json.dumps({"schemaVersion": 2, "manifests": entries}).encode())
        for b in [cfg, man] + blobs:
            add(tar, "blobs/sha256/" + sha(b) if b is not blobs[0] or bad != "blob-digest"
                else "blobs/sha256/" + descs[0]["digest"][7:], b)
        if fmt == "docker-oci":
            add(tar, "manifest.json", json.dumps([{
                "Config": "blobs/sha256/" + sha(cfg), "RepoTags": ["test:v1"],
                "Layers": ["blobs/sha256/" + d["digest"][7:] for d in descs]}]).encode())


if __name__ == "__main__":
    build(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
