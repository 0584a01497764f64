"""CPU affinity for `./ref2va selftest`'s concurrent phases and `./ref2va campaign`'s lanes (Linux).

    python scripts/cpu_affinity.py split          -> "FIRST REST": the first CPU this process may
                                                     run on, then the others joined by commas
                                                     (nothing when there is only one)
    python scripts/cpu_affinity.py lanes N        -> the CPUs this process may run on, dealt into
                                                     N groups, a line each (CPUs joined by
                                                     commas); with fewer CPUs than N, lanes
                                                     share them in turn; N 0: one per CPU
    python scripts/cpu_affinity.py widen PID...   -> every process of those process trees (the
                                                     pids and all their descendants) may run on
                                                     every CPU this process may run on

`./ref2va campaign` pins each lane (a session judging some of the tracks) to one group.
The timed self-tests run on the first CPU while everything else runs on the rest; once they are
done, `widen` gives the rest back the whole machine. Processes started later inherit the wide
mask from their parents. A process that ends during the walk is skipped; anything else that
fails is said on stderr and the exit code is 1 (the selftest goes on, only slower).
"""

from __future__ import annotations

import os
import sys

import psutil


def widen(roots: list[int]) -> int:
    cpus = os.sched_getaffinity(0)
    processes: list[psutil.Process] = []
    for pid in roots:
        try:
            root = psutil.Process(pid)
            processes += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue  # ended meanwhile
    failed = 0
    for process in processes:
        # Every thread of a process has its own mask (torch's, xdist's): set each one.
        try:
            threads = [thread.id for thread in process.threads()]
        except psutil.NoSuchProcess:
            continue
        for tid in threads:
            try:
                os.sched_setaffinity(tid, cpus)
            except ProcessLookupError:
                continue
            except OSError as exc:
                failed += 1
                print(f"cpu_affinity: cannot widen pid {process.pid} thread {tid}: {exc}",
                      file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["split"] and len(argv) == 1:
        cpus = sorted(os.sched_getaffinity(0))
        print(cpus[0], ",".join(str(c) for c in cpus[1:]))
        return 0
    if argv[:1] == ["lanes"] and len(argv) == 2 and argv[1].isdigit():
        cpus = sorted(os.sched_getaffinity(0))
        count = int(argv[1]) or len(cpus)
        if count > len(cpus):  # more lanes than CPUs: one CPU each, in turn
            for group in range(count):
                print(cpus[group % len(cpus)])
            return 0
        for group in range(count):
            print(",".join(str(c) for c in cpus[group::count]))
        return 0
    if argv[:1] == ["widen"] and len(argv) > 1 and all(a.isdigit() for a in argv[1:]):
        return widen([int(a) for a in argv[1:]])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
