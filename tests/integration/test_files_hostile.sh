#!/usr/bin/env bash
# Integration tests of every copy into a sandbox against a hostile sandbox: links it planted to
# each /dev node, to a bind-mounted host file and to /proc, FIFOs, and archives that plant links
# themselves; through octet-stream PUT, tar PUT, GET (file and directory) and fork seeds. Every
# case runs in a private mount namespace (unshare -m) where /dev/null, /dev/zero, /dev/full,
# /dev/random, /dev/urandom, /dev/tty and /etc/ssl are private stand-ins (mknod on a tmpfs,
# bound over the real paths in that namespace only); the daemon starts inside it, so the
# sandboxes get the stand-ins. The host's real nodes are never touched. After each case the
# stand-ins' owner, mode and contents must be unchanged. The planted-link cases also run with
# gVisor sandboxes (gvisor_<case>): the links are planted through gVisor's kernel, the copies
# are the daemon's on the host side, as in the native class.

DAEMON_TAG=hostile
source "$(dirname "$0")/../lib/daemon.sh"

NODES="null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0"
ISO='' # the create body of the case's sandboxes: '' native, '{"isolation":"gvisor"}' for gvisor_*

# Re-run case $1 in a private mount namespace with the stand-ins in place (SN: their tmpfs).
private_ns() {
  if [ -z "${SBX_PRIVATE_NS:-}" ]; then
    require_root
    command -v unshare >/dev/null || skip "unshare (util-linux) is needed"
    local t rc=0
    t=$(mktemp -d /tmp/sbx-standins.XXXXXX)
    SBX_PRIVATE_NS=$t unshare -m --propagation private bash "$0" "$1" || rc=$?
    rm -rf "$t"
    exit $rc
  fi
  SN=$SBX_PRIVATE_NS
  mount -t tmpfs -o mode=0755,size=1m sbx-standins "$SN" || fail "mount the stand-ins' tmpfs"
  local n name maj min
  for n in $NODES; do
    IFS=: read -r name maj min <<<"$n"
    mknod -m 0666 "$SN/$name" c "$maj" "$min" || fail "mknod $name"
    mount --bind "$SN/$name" "/dev/$name" || fail "bind the stand-in over /dev/$name"
  done
  mkdir -p "$SN/ssl" /etc/ssl && echo "host file" >"$SN/ssl/host.cnf" && chmod 0640 "$SN/ssl/host.cnf"
  mount --bind "$SN/ssl" /etc/ssl || fail "bind the stand-in over /etc/ssl"
  [ "$(stat -c %i /dev/null)" == "$(stat -c %i "$SN/null")" ] || fail "the stand-in is not in place"
  standins >"$SN/.before"
}

standins() { # owner, mode, type and size of every stand-in, and the bound file's contents
  stat -c '%n %u:%g %a %F %t:%T %s' "$SN"/* "$SN"/ssl/* /dev/null /dev/full /dev/tty
  cat "$SN/ssl/host.cnf"
}
check_standins() {
  standins >"$SN/.after"
  diff "$SN/.before" "$SN/.after" >&2 || fail "a stand-in host node changed ($1)"
}

run_ok() { # ID script: run sh -c script in the sandbox, exit 0 wanted
  req POST "/v1/sandboxes/$1/exec" -d "$(jq -nc --arg s "$2" '{argv:["sh","-c",$s]}')"
  expect 200 '.exit_code == 0'
}
put() { # ID path data [content-type]
  req PUT "/v1/sandboxes/$1/files?path=$2" -H "Content-Type: ${4:-application/octet-stream}" --data-binary "$3"
}

# The links a hostile sandbox plants in /workspace (and a FIFO).
LINKS='for n in null zero full random urandom tty; do ln -sfn /dev/$n /workspace/l_$n; done
ln -sfn /etc/ssl/host.cnf /workspace/l_bind; ln -sfn /proc/self/environ /workspace/l_proc
ln -sfn /dev /workspace/l_devdir; ln -sfn /proc/sys/kernel /workspace/l_procdir
ln -sfn /etc/ssl /workspace/l_binddir; rm -f /workspace/fifo; mkfifo /workspace/fifo'
NAMES="l_null l_zero l_full l_random l_urandom l_tty l_bind l_proc fifo"

mktar() { # out.tar python-statements using t (a tarfile open for writing) and add(name, data)
  python3 - "$1" "$2" <<'EOF'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT)
def add(name, data=b"x", **kw):
    i = tarfile.TarInfo(name); i.size = len(data)
    for k, v in kw.items(): setattr(i, k, v)
    t.addfile(i, io.BytesIO(data))
def link(name, target):
    i = tarfile.TarInfo(name); i.type = tarfile.SYMTYPE; i.linkname = target; t.addfile(i)
exec(sys.argv[2])
t.close()
EOF
}

TEST_TIMEOUT_put_onto_planted_links=90
test_put_onto_planted_links() {
  private_ns put_onto_planted_links
  start_daemon
  create ${ISO:+"$ISO"}; local id=$ID
  run_ok "$id" "$LINKS"
  local n
  # a tar with regular entries onto planted links: each node is replaced by a regular file,
  # the link's target is never opened, chowned or chmodded
  mktar "$D/over.tar" "$(for n in $NAMES; do printf 'add("%s", b"tar %s")\n' "$n" "$n"; done)"
  put "$id" /workspace "@$D/over.tar" application/x-tar
  check_standins "tar PUT onto planted links"
  expect 204
  for n in $NAMES; do
    run_ok "$id" "[ -f /workspace/$n ] && [ ! -L /workspace/$n ] && [ \"\$(cat /workspace/$n)\" = 'tar $n' ]"
  done
  # the same with octet-stream PUTs
  run_ok "$id" "$LINKS"
  for n in $NAMES; do
    put "$id" "/workspace/$n" "new $n"; expect 204
  done
  check_standins "octet-stream PUT onto planted links"
  for n in $NAMES; do
    run_ok "$id" "[ -f /workspace/$n ] && [ ! -L /workspace/$n ] && [ \"\$(cat /workspace/$n)\" = 'new $n' ] && [ \$(stat -c %u /workspace/$n) = 1000 ]"
  done
  # an archive that plants the link itself, then a regular entry of the same name
  for n in null zero full random urandom tty; do
    mktar "$D/self.tar" "link('n_$n', '/dev/$n'); add('n_$n', b'over'); link('b_$n', '/etc/ssl/host.cnf'); add('b_$n', b'over')"
    put "$id" /workspace "@$D/self.tar" application/x-tar; expect 204
  done
  check_standins "archives planting links"
  run_ok "$id" '[ "$(cat /workspace/n_full)" = over ] && [ ! -L /workspace/n_full ]'
}

TEST_TIMEOUT_put_through_planted_dirs=90
test_put_through_planted_dirs() {
  private_ns put_through_planted_dirs
  start_daemon
  create ${ISO:+"$ISO"}; local id=$ID
  run_ok "$id" "$LINKS"
  local p
  # a directory link anywhere on the way is refused (400), nothing is made
  for p in /workspace/l_devdir/null /workspace/l_devdir/newfile /workspace/l_procdir/hostname \
    /workspace/l_binddir/host.cnf /workspace/l_binddir/new /workspace/l_devdir/sub/f; do
    put "$id" "$p" "x"; expect 400
  done
  # straight at the nodes, /dev, /proc and the bind-mounted directory: refused
  for p in /dev/null /dev/full /dev/tty /dev/newfile /proc/sys/kernel/hostname /etc/ssl/host.cnf \
    /etc/ssl/new /dev/shm/x; do
    put "$id" "$p" "x"; expect 400
  done
  # tar entries under a planted directory link, or under one the archive makes
  mktar "$D/under.tar" "add('l_devdir/null'); add('l_binddir/host.cnf')"
  put "$id" /workspace "@$D/under.tar" application/x-tar; expect 400
  mktar "$D/mk.tar" "link('d', '/dev'); add('d/null'); add('d/full')"
  put "$id" /workspace "@$D/mk.tar" application/x-tar; expect 400
  mktar "$D/mk2.tar" "link('e', '/etc/ssl'); add('e/host.cnf')"
  put "$id" /workspace "@$D/mk2.tar" application/x-tar; expect 400
  # the link's name spelled with "." or empty components: refused whole, before any entry is
  # written (the names are checked as they are extracted)
  run_ok "$id" 'mkdir /workspace/tt'
  local n
  for n in x/./l x//l ./x/./l/ x/l; do
    mktar "$D/mk3.tar" "add('first.txt'); link('$n', '/etc/ssl'); add('x/l/host.cnf')"
    put "$id" /workspace/tt "@$D/mk3.tar" application/x-tar
    expect 400 '.message | contains("beneath a symlink the archive makes")'
    run_ok "$id" '[ -z "$(ls -A /workspace/tt)" ]'
  done
  # a tar PUT whose destination is a link, or a device, or /dev
  for p in /workspace/l_devdir /dev /workspace/l_null /proc; do
    mktar "$D/plain.tar" "add('null'); add('host.cnf')"
    put "$id" "$p" "@$D/plain.tar" application/x-tar; expect 400
  done
  # device entries in an archive are refused
  python3 - "$D/dev.tar" <<'EOF'
import sys, tarfile
t = tarfile.open(sys.argv[1], "w"); i = tarfile.TarInfo("mydev"); i.type = tarfile.CHRTYPE
i.devmajor, i.devminor = 1, 3; t.addfile(i); t.close()
EOF
  put "$id" /workspace "@$D/dev.tar" application/x-tar; expect 400
  check_standins "PUT through planted directories"
  run_ok "$id" '[ ! -e /workspace/mydev ] && [ -L /workspace/l_devdir ]'
}

TEST_TIMEOUT_get_of_nodes_and_links=60
test_get_of_nodes_and_links() {
  private_ns get_of_nodes_and_links
  start_daemon
  create ${ISO:+"$ISO"}; local id=$ID
  run_ok "$id" "$LINKS"
  local p
  # a clear 4xx, at once (a FIFO nobody writes, /dev/tty, /dev/zero would block or never end)
  for p in /workspace/l_null /workspace/l_zero /workspace/l_tty /workspace/l_bind /workspace/l_proc \
    /workspace/fifo /workspace/l_devdir /workspace/l_devdir/zero /workspace/l_binddir/host.cnf \
    /dev/tty /dev/null /dev/zero /dev/urandom /proc/self/environ /proc/1/environ; do
    req GET "/v1/sandboxes/$id/files?path=$p"
    # gVisor keeps a FIFO in its own memory (no --host-fifo) and its /proc is its own: the
    # host side of its root has neither
    if [ -n "$ISO" ] && [[ "$p" == /workspace/fifo || "$p" == /proc/* ]]; then
      expect 404; continue
    fi
    [ "$CODE" == 400 ] || fail "GET $p: expected 400, got $CODE: $BODY"
    echo "$BODY" | jq -e '.code == "invalid_argument" and (.message | length > 0)' >/dev/null || fail "GET $p: $BODY"
  done
  # a directory with all of them: the links travel as links, the FIFO is left out
  req GET "/v1/sandboxes/$id/files?path=/workspace"; expect 200
  tar -tvf "$D/body" >"$D/list" || fail "bad tar"
  grep -q 'l_null -> /dev/null' "$D/list" || fail "the link is not in the tar: $(cat "$D/list")"
  ! grep -q 'fifo' "$D/list" || fail "the FIFO is in the tar"
  # a directory GET of /dev, /proc or a bind-mounted directory is refused
  for p in /dev /proc /workspace/l_devdir; do
    req GET "/v1/sandboxes/$id/files?path=$p"
    if [ -n "$ISO" ] && [ "$p" == /proc ]; then # gvisor: the image's empty directory
      expect 200; [ -z "$(tar -tf "$D/body" | grep -v '^\./$')" ] || fail "/proc: $(tar -tf "$D/body")"
      continue
    fi
    expect 400
  done
  req GET /healthz; expect 200
  check_standins "GET"
}

TEST_TIMEOUT_fork_with_planted_links=90
test_fork_with_planted_links() {
  private_ns fork_with_planted_links
  start_daemon
  create ${ISO:+"$ISO"}; local id=$ID
  run_ok "$id" "$LINKS; echo data > /workspace/f; mkdir -p /tmp/d; ln -sfn /dev/full /tmp/d/lf"
  req POST "/v1/sandboxes/$id/fork" -d '{"count":2}'
  expect 201 'length == 2'
  local f
  for f in $(echo "$BODY" | jq -r '.[].id'); do
    run_ok "$f" '[ "$(readlink /workspace/l_null)" = /dev/null ] && [ "$(readlink /tmp/d/lf)" = /dev/full ] && [ "$(cat /workspace/f)" = data ] && [ ! -e /workspace/fifo ]'
    put "$f" /workspace/l_full "over"; expect 204
  done
  check_standins "fork seeds"
}

# The six nodes are the host's own inodes (bound from /dev): a sandbox may read and write them
# but not change them, not even their times (`touch` needs only write access to a 0666 node).
TEST_TIMEOUT_dev_nodes_unchanged=60
test_dev_nodes_unchanged() {
  private_ns dev_nodes_unchanged
  local n
  for n in null zero full random urandom tty; do touch -d '2001-02-03 04:05:06' "$SN/$n"; done
  stat -c '%n %X %Y %Z' "$SN"/{null,zero,full,random,urandom,tty} >"$SN/.times"
  sleep 1 # (a ctime set in this second would match a ctime set by the sandbox in it)
  start_daemon
  create; local id=$ID
  run_ok "$id" 'echo x >/dev/null && [ "$(head -c 3 /dev/zero | wc -c)" = 3 ] &&
    ! echo x >/dev/full && head -c 1 /dev/urandom >/dev/null
    for n in null zero full random urandom tty; do touch /dev/$n 2>/dev/null; done; true'
  stat -c '%n %X %Y %Z' "$SN"/{null,zero,full,random,urandom,tty} >"$SN/.times2"
  diff "$SN/.times" "$SN/.times2" >&2 || fail "a sandbox changed a host node's times"
  check_standins "touch of the nodes"
}

gvisor() { # CASE: the case with gvisor sandboxes
  command -v runsc >/dev/null || skip "runsc (gVisor) is not installed: apt-get install runsc"
  ISO='{"isolation":"gvisor"}'
  private_ns "gvisor_$1"
  "test_$1"
}
TEST_TIMEOUT_gvisor_put_onto_planted_links=90
TEST_PASS_gvisor_put_onto_planted_links=plain # (once: tests/README.md)
test_gvisor_put_onto_planted_links() { gvisor put_onto_planted_links; }
TEST_TIMEOUT_gvisor_put_through_planted_dirs=90
TEST_PASS_gvisor_put_through_planted_dirs=plain # (once: tests/README.md)
test_gvisor_put_through_planted_dirs() { gvisor put_through_planted_dirs; }
TEST_TIMEOUT_gvisor_get_of_nodes_and_links=60
test_gvisor_get_of_nodes_and_links() { gvisor get_of_nodes_and_links; }

source "$(dirname "$0")/../lib/lib.sh"
