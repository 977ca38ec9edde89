# bench/freezer.py [N] [ROUNDS]: what one freeze and thaw of an empty cgroup v1 freezer cgroup
# costs (writes of FROZEN, then THAWED, to its freezer.state: what a sandbox's end does at
# least once, shim/cgroup.c shim_cgroup_kill_all), with no other cgroup frozen and with one
# empty cgroup kept frozen beside it (the daemon's freeze anchor, sandboxd/core/cgroup.c).
# Linux's v1 freezer switches a static key on as the first cgroup starts freezing and off as
# the last one thaws, rewriting kernel text on every CPU; while another cgroup stays frozen the
# key stays on. ROUNDS (5) rounds alternate the two, N (300) pairs each; prints the median of
# the rounds' means of this process's CPU and wall time per pair, and their ratio. The other
# CPUs' share of each switch (the IPIs that sync their text) is not in this process's CPU.
# Needs root and cgroup v1's freezer hierarchy; makes and removes two cgroups under
# /sys/fs/cgroup/freezer, and nothing else may be frozen meanwhile (a running sandboxd keeps its
# anchor: stop it first). Standard library only.
import os
import statistics
import sys
import time

FZ = "/sys/fs/cgroup/freezer"


def write(d, state):
    with open(f"{d}/freezer.state", "w") as f:
        f.write(state)


def pairs(d, n):
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(n):
        write(d, "FROZEN")
        write(d, "THAWED")
    return (time.process_time() - c0) / n * 1e3, (time.perf_counter() - w0) / n * 1e3


def frozen_elsewhere(skip):
    for root, dirs, files in os.walk(FZ):
        if root not in skip and "freezer.state" in files:
            with open(f"{root}/freezer.state") as f:
                if f.read().strip() != "THAWED":
                    yield root


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    if not os.path.isfile(f"{FZ}/cgroup.procs"):
        sys.exit("bench/freezer.py: no cgroup v1 freezer hierarchy at " + FZ)
    tag = f"sbxbench-freezer-{os.getpid()}"
    sb, anchor = f"{FZ}/{tag}-sandbox", f"{FZ}/{tag}-anchor"
    others = list(frozen_elsewhere({sb, anchor}))
    if others:
        sys.exit("bench/freezer.py: frozen already (their key is on): " + " ".join(others))
    os.mkdir(sb)
    try:
        alone, beside = [], []
        for _ in range(rounds):
            alone.append(pairs(sb, n))
            os.mkdir(anchor)
            write(anchor, "FROZEN")
            beside.append(pairs(sb, n))
            write(anchor, "THAWED")  # the key goes off here, not in the rmdir's later offline
            os.rmdir(anchor)
    finally:
        for d in (anchor, sb):
            if os.path.isdir(d):
                write(d, "THAWED")
                os.rmdir(d)
    a_cpu, a_wall = (statistics.median(x[i] for x in alone) for i in (0, 1))
    b_cpu, b_wall = (statistics.median(x[i] for x in beside) for i in (0, 1))
    print(f"# freeze + thaw of an empty v1 freezer cgroup, {rounds} rounds x {n} pairs, "
          f"load {os.getloadavg()[0]:.2f}")
    print("| what | CPU ms per pair | wall ms per pair |\n|---|---|---|")
    print(f"| no other cgroup frozen | {a_cpu:.3f} | {a_wall:.3f} |")
    print(f"| an empty cgroup kept frozen beside it | {b_cpu:.3f} | {b_wall:.3f} |")
    print(f"| ratio | {a_cpu / b_cpu:.1f}x | {a_wall / b_wall:.1f}x |")
    print("\nCPU ms per pair by round, alone / beside:",
          ", ".join(f"{a[0]:.3f} / {b[0]:.3f}" for a, b in zip(alone, beside)))


main()
