# shellcheck shell=bash
# bench/docker.sh: the Docker peer (Debian's docker.io, `apt-get install docker.io`; bench-only,
# not in tests/deps.sh). Sourced by bench/run.sh after bench/common.sh (needs T, B, N, NFAST,
# LAT, run_lat, note, loud). Starts a private dockerd that leaves the host alone (no iptables or
# ip6tables rules, no bridge, no ip_forward change, data root, exec root, socket and cgroups of
# its own under $T), imports the debootstrap rootfs the image tests cache as an image (offline),
# and measures, with --network none:
#   spawn.docker_run    `docker run --rm --network none IMG true` (the create -> exec -> delete peer)
#   spawn.docker_exec   `docker exec C true` in a running container (the exec round trip peer)
#   attach.rtt.docker   one line through `docker exec -i C cat` (bench/attach_rtt.c pipe mode)
# docker_stop (also run by common.sh's cleanup) removes the container, stops dockerd by its PID,
# unmounts what it left under $T and removes its data root.

DOCKERD_PID=
DOCKER_C=
DOCKER_DRV=
DOCKER_IMG=sbxbench-debian:bookworm
DOCKER_ROOTFS=${SBX_IMAGE_CACHE:-/var/cache/sandboxd-tests}/debian-bookworm-minbase-nodev.tar.gz

# the client that goes with this dockerd (not an unrelated `docker` earlier in PATH), on its socket
DOCKER=(env "DOCKER_CONFIG=$T/docker-config" /usr/bin/docker -H "unix://$T/docker.sock")

docker_stop() {
  [ -n "$DOCKERD_PID" ] || return 0
  [ -z "$DOCKER_C" ] || timeout 30 "${DOCKER[@]}" rm -f "$DOCKER_C" >/dev/null 2>&1 || true
  DOCKER_C=
  kill -TERM "$DOCKERD_PID" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$DOCKERD_PID" 2>/dev/null || true
  wait "$DOCKERD_PID" 2>/dev/null || true
  DOCKERD_PID=
  # the managed containerd and its shims name $T in their command lines
  for p in /proc/[0-9]*; do
    ! tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF "$T/docker" || kill -KILL "${p#/proc/}" 2>/dev/null || true
  done
  sleep 0.2
  grep -F " $T/docker" /proc/mounts | awk '{print $2}' | sort -r | while read -r m; do umount -l "$m"; done || true
  for c in /sys/fs/cgroup/*/"$CGPARENT-docker"; do # --cgroup-parent: one per hierarchy
    [ ! -d "$c" ] || find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  rm -rf "$T/docker" "$T/docker-exec" "$T/docker-config"
}

# the cached debootstrap rootfs, built like tests/integration/test_images.sh does when missing
docker_rootfs() {
  [ -s "$DOCKER_ROOTFS" ] && return 0
  command -v debootstrap >/dev/null || return 1
  local mirror dir t
  mirror=$(grep -rhoE '(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null | head -1 | grep -oE 'https?://[^ ]+')
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
  dir=$(dirname "$DOCKER_ROOTFS")
  mkdir -p "$dir"
  t=$(mktemp -d "$dir/debootstrap.XXXXXX")
  log "docker: debootstrap bookworm (once per machine) into $DOCKER_ROOTFS"
  ( # as tests/integration/test_images.sh: no device nodes in the tarball
    flock 9
    [ -s "$DOCKER_ROOTFS" ] || { debootstrap --variant=minbase bookworm "$t/root" "$mirror" >"$t.log" 2>&1 &&
      tar -C "$t/root" --numeric-owner --exclude='./dev/*' -czf "$t/rootfs.tar.gz" . &&
      mv "$t/rootfs.tar.gz" "$DOCKER_ROOTFS"; }
  ) 9>"$dir/.lock"
  local rc=$?
  rm -rf "$t" "$t.log"
  return $rc
}

docker_start() { # storage driver
  rm -rf "$T/docker" "$T/docker-exec"
  mkdir -p "$T/docker" "$T/docker-exec" "$T/docker-config"
  echo '{}' >"$T/docker-daemon.json"
  dockerd --config-file "$T/docker-daemon.json" --iptables=false --ip6tables=false --bridge=none \
    --ip-forward=false --ip-masq=false --data-root "$T/docker" --exec-root "$T/docker-exec" \
    --pidfile "$T/docker.pid" -H "unix://$T/docker.sock" --storage-driver "$1" \
    --cgroup-parent "/$CGPARENT-docker" >>"$T/dockerd.log" 2>&1 &
  DOCKERD_PID=$!
  for _ in $(seq 300); do
    timeout 5 "${DOCKER[@]}" version >/dev/null 2>&1 && return 0
    kill -0 "$DOCKERD_PID" 2>/dev/null || break
    sleep 0.1
  done
  docker_stop
  return 1
}

# docker_up: the private dockerd running and the image imported (else a loud note, status 1)
docker_up() {
  if ! command -v dockerd >/dev/null || [ ! -x /usr/bin/docker ]; then
    loud "Docker peer: dockerd or /usr/bin/docker is missing (bench-only peer: apt-get install docker.io)"
    return 1
  fi
  if ! docker_rootfs; then
    loud "Docker peer: no debootstrap rootfs at $DOCKER_ROOTFS and debootstrap could not build it"
    return 1
  fi
  for DOCKER_DRV in overlay2 vfs; do
    if docker_start "$DOCKER_DRV"; then break; fi
    DOCKER_DRV=
  done
  if [ -z "$DOCKER_DRV" ]; then
    loud "Docker peer: dockerd did not start: $(grep -v module=grpc "$T/dockerd.log" | tail -n 3 | tr '\n' ' ')"
    return 1
  fi
  log "docker (dockerd pid $DOCKERD_PID, $DOCKER_DRV): importing $DOCKER_ROOTFS"
  if ! "${DOCKER[@]}" import - "$DOCKER_IMG" <"$DOCKER_ROOTFS" >/dev/null; then
    loud "Docker peer: docker import of $DOCKER_ROOTFS failed"
    docker_stop
    return 1
  fi
}

docker_bench() {
  docker_up || return 0
  local ver
  ver=$("${DOCKER[@]}" version --format '{{.Server.Version}}' 2>/dev/null)
  note "Docker peer: Debian's docker.io $ver, a private dockerd (\`--iptables=false --ip6tables=false --bridge=none --ip-forward=false\`, storage driver $DOCKER_DRV, own data root), image imported offline from the debootstrap rootfs (bookworm minbase), containers with \`--network none\`; \`docker\` is the whole client process each time."
  log "docker: run --rm true"
  run_lat spawn spawn.docker_run "$N" "${DOCKER[@]}" \
    run --rm --network none "$DOCKER_IMG" true || note "\`docker run --rm\` failed (see stderr)"
  DOCKER_C=$("${DOCKER[@]}" run -d --network none "$DOCKER_IMG" sleep infinity 2>/dev/null || true)
  if [ -n "$DOCKER_C" ]; then
    log "docker: exec true, exec -i cat"
    run_lat spawn spawn.docker_exec "$N" "${DOCKER[@]}" \
      exec "$DOCKER_C" true || note "\`docker exec C true\` failed (see stderr)"
    if attach_rtt_build; then
      "$RTT" pipe attach.rtt.docker "$N" "${DOCKER[@]}" \
        exec -i "$DOCKER_C" cat | tee -a "$RES" >&2 || note "\`docker exec -i C cat\` failed"
    fi
  else
    note "docker exec rows: the running container could not be started"
  fi
  docker_stop
}

# bench/attach_rtt.c into $RTT (run.sh also uses it for the sandboxd and local-pipe rows; it links
# libsbx for its sbx mode)
attach_rtt_build() {
  RTT=${RTT:-$T/attach_rtt}
  [ -x "$RTT" ] && return 0
  if [ ! -f "$B/libsbx.a" ]; then
    note "attached round trip rows: $B/libsbx.a is missing (run make)"
    return 1
  fi
  # shellcheck disable=SC2046 # pkg-config output is meant to split
  cc -std=c17 -O2 -Wall -Wextra -Werror -Iclient/include -o "$RTT" bench/attach_rtt.c "$B/libsbx.a" \
    $(pkg-config --libs libuv libcurl jansson libcrypto) -lm
}
