#!/usr/bin/env bash
# Builds the network suite's private world (never a test itself). Run INSIDE the test's own
# "host" netns; $1 is the pid of a process holding the "internet" netns. Topology:
#   host netns: up0 198.51.100.1/24, 2001:db8:1::1/64, default routes via the internet netns
#   internet netns: eth0 198.51.100.2/24, 2001:db8:1::2/64, and on lo:
#     203.0.113.10, 203.0.113.20, 2001:db8:2::10   ("internet" hosts, allowed / denied by tests)
#     169.254.169.254, 169.254.170.2, fd00:ec2::254  (fake cloud metadata)
#     10.9.9.9                                         (a private-range host)
set -euo pipefail
inet=$1
ns() { nsenter -t "$inet" -n "$@"; }
ip link set lo up
ip link add up0 type veth peer name eth0 netns "/proc/$inet/ns/net"
ip addr add 198.51.100.1/24 dev up0
ip -6 addr add 2001:db8:1::1/64 dev up0 nodad
ip link set up0 up
ip route add default via 198.51.100.2
ns ip link set lo up
ns ip addr add 198.51.100.2/24 dev eth0
ns ip -6 addr add 2001:db8:1::2/64 dev eth0 nodad
ns ip link set eth0 up
for a in 203.0.113.10 203.0.113.20 169.254.169.254 169.254.170.2 10.9.9.9; do
  ns ip addr add "$a/32" dev lo
done
for a in 2001:db8:2::10 fd00:ec2::254; do ns ip -6 addr add "$a/128" dev lo nodad; done
# up0 must be up before an IPv6 default route can use it
ip -6 route add default via 2001:db8:1::2 dev up0
