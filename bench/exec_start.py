# bench/exec_start.py BIN [BIN...] [--n N] [--rounds R]: what starting a program costs: R (5)
# rounds, alternating the binaries, of N (300) posix_spawn + wait of `BIN --help` (output to
# /dev/null); prints, per binary, the median of the rounds' CPU (user + system of the child) and
# wall time per start, and each binary's ratio to the first. E.g. a dynamically and a statically
# linked sbx-shim: the daemon starts one per sandbox (a spare), so its start is in every create.
# Standard library only; needs nothing else.
import os
import resource
import statistics
import sys
import time


def run(binary, n):
    null = [(os.POSIX_SPAWN_OPEN, fd, "/dev/null", os.O_WRONLY, 0) for fd in (1, 2)]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    for _ in range(n):
        pid = os.posix_spawn(binary, [binary, "--help"], {}, file_actions=null)
        os.waitpid(pid, 0)
    t1 = time.perf_counter()
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return cpu / n * 1000, (t1 - t0) / n * 1000


def main(argv):
    n, rounds, bins = 300, 5, []
    it = iter(argv)
    for a in it:
        if a == "--n":
            n = int(next(it))
        elif a == "--rounds":
            rounds = int(next(it))
        else:
            bins.append(a)
    if not bins:
        sys.exit("usage: bench/exec_start.py BIN [BIN...] [--n N] [--rounds R]")
    got = {b: ([], []) for b in bins}
    for _ in range(rounds):
        for b in bins:
            cpu, wall = run(b, n)
            got[b][0].append(cpu)
            got[b][1].append(wall)
    print(f"| binary ({rounds} rounds of {n} starts, medians) | CPU ms | wall ms | CPU ÷ first |")
    print("|---|---|---|---|")
    first = statistics.median(got[bins[0]][0])
    for b in bins:
        cpu, wall = statistics.median(got[b][0]), statistics.median(got[b][1])
        print(f"| {b} | {cpu:.3f} | {wall:.3f} | {cpu / first:.2f}× |")


if __name__ == "__main__":
    main(sys.argv[1:])
