#!/usr/bin/env bash
# Fleet placement of GPU creates with real daemons (docs/FLEET.md "GPUs"): in the small fleet
# world of fleetd_world.sh (real etcd, daemons a and b, one private netns), run in a private
# mount namespace with stand-in NVIDIA nodes (tests/lib/gpu_standins.sh: mknod on a tmpfs
# there, never the host's /dev). Node a has one stand-in GPU from its config inventory, node b
# none: a "gpus":1 create sent to b is redirected (307) to a and runs there with the GPU; when
# no node has a free GPU, the create is answered 409 gpu_unavailable where it arrives.
DAEMON_TAG=fleetg
source "$(dirname "$0")/../lib/daemon.sh"
source "$(dirname "$0")/../lib/gpu_standins.sh"
source "$(dirname "$0")/fleetd_world.sh"

TEST_TIMEOUT_gpu_create_sent_to_the_gpu_node=90
test_gpu_create_sent_to_the_gpu_node() {
  gpu_standins gpu_create_sent_to_the_gpu_node
  world
  daemon_use a
  jq -n --arg sn "$SN" '{gpus: [{device: "\($sn)/nvidia0", uuid: "GPU-fleet-0"}],
    gpu_control: ["\($sn)/nvidiactl"]}' >"$D/config.json"
  fleet_daemon a --config "$D/config.json"
  daemon_use b
  echo '{"gpus": []}' >"$D/config.json" # an inventory of none: no discovery of the host's /dev
  fleet_daemon b --config "$D/config.json"
  wait_view b "($(node a) | .gpus == {\"total\": 1, \"free\": 1}) and ($(node b) | .gpus.total == 0)"
  # b has no GPU: the create is sent to a (placed=1), and the client that follows it gets one
  freq0 b POST /v1/sandboxes -d '{"gpus":1,"memory":"64Mi"}'
  fexpect 307
  assert_eq "$(header Location)" "https://127.0.0.1:7441/v1/sandboxes?placed=1" "Location"
  # (b counted that GPU against a in its view until its next hand-over, each second at most)
  wait_view b "$(node a) | .gpus.free == 1"
  freq b POST /v1/sandboxes -d '{"gpus":1,"memory":"64Mi"}'
  fexpect 201 '(.id | endswith(".a")) and .gpus == ["GPU-fleet-0"]'
  local id
  id=$(jq -r .id <<<"$BODY")
  freq b POST "/v1/sandboxes/$id/exec" -d '{"argv":["sh","-c","ls /dev | grep nvidia; echo $NVIDIA_VISIBLE_DEVICES"]}'
  fexpect 200 '.exit_code == 0 and .stdout == "nvidia0\nnvidiactl\nGPU-fleet-0\n"'
  # the fleet's one GPU is taken: a GPU create is refused where it arrives, typed, on both nodes
  wait_view b "$(node a) | .gpus.free == 0"
  freq0 b POST /v1/sandboxes -d '{"gpus":1,"memory":"64Mi"}'
  fexpect 409 '.code == "gpu_unavailable"'
  freq0 a POST /v1/sandboxes -d '{"gpus":1,"memory":"64Mi"}'
  fexpect 409 '.code == "gpu_unavailable"'
  # a create without GPUs on b stays on b
  freq0 b POST /v1/sandboxes -d '{"memory":"64Mi"}'
  fexpect 201 '.id | endswith(".b")'
  # freed on a: b sends the next GPU create there again
  freq b DELETE "/v1/sandboxes/$id"
  fexpect 204
  wait_view b "$(node a) | .gpus.free == 1"
  freq b POST /v1/sandboxes -d '{"gpus":1,"memory":"64Mi"}'
  fexpect 201 '(.id | endswith(".a")) and .gpus == ["GPU-fleet-0"]'
}

source "$(dirname "$0")/../lib/lib.sh" "$@"
