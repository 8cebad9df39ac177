"""Benchmark helper (not a test): the CPU seconds of a command's WHOLE process
tree, read from a cgroup (v2) made for the run. A grading's ranks are forked
by the zygote, not waited for by the command, so `farm-bench`'s user + system
(the processes the command waited for) counts about a third of it.

    .venv/bin/python bench/tree_cpu.py [--runs 5] [--vs 'COMMAND_B'] -- COMMAND [ARG ...]

Runs COMMAND (and COMMAND_B, in turn) after one unmeasured run each; prints
the median wall and tree-CPU seconds and their ranges. Needs a writable cgroup
v2 hierarchy (root on this machine); `tree_cpu_seconds` returns None where
there is none, and the bench says so.
"""
from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import time

from shardlab.autograder.sandbox.jail import _cgroup_mounts, _own_cgroup


def _unified_folder() -> str | None:
    """This process's own cgroup v2 folder, if the hierarchy is mounted and writable (found as the
    sandbox finds it: `jail._cgroup_mounts`, `jail._own_cgroup`)."""
    point = _cgroup_mounts().get("unified")
    if point is None:
        return None
    folder = point + _own_cgroup("unified")
    return folder if os.access(folder, os.W_OK) else None


def cgroup_cpu_seconds(folder: str) -> float:
    """The CPU seconds a cgroup (v2) folder's processes have used, from its `cpu.stat`."""
    with open(os.path.join(folder, "cpu.stat")) as f:
        return int(dict(line.split() for line in f)["usage_usec"]) / 1e6


def _remove(folder: str) -> None:
    """The run's cgroup and those its command made inside it (the sandboxes'), deepest first."""
    for path, _, _ in sorted(os.walk(folder), key=lambda entry: -entry[0].count(os.sep)):
        try:
            os.rmdir(path)
        except OSError:
            pass


def tree_cpu_seconds(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float | None]:
    """(wall seconds, CPU seconds of every process the command's tree ran, or None without a cgroup)."""
    parent = _unified_folder()
    folder = os.path.join(parent, f"bench-{os.getpid()}-{time.monotonic_ns()}") if parent else None
    if folder:
        os.mkdir(folder)
        # the shell joins the cgroup before it becomes the command: everything the command starts is in it
        cmd = ["sh", "-c", f'echo $$ > "{folder}/cgroup.procs" && exec "$@"', "sh", *cmd]
    start = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    wall = time.perf_counter() - start
    if not folder:
        return wall, None
    try:
        time.sleep(0.3)                 # what the command killed on its way out is charged as it exits
        return wall, cgroup_cpu_seconds(folder)
    finally:
        _remove(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--vs", default=None, help="a second command, as one string (split as a shell would)")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    commands = [command] + ([shlex.split(args.vs)] if args.vs else [])
    figures: list[tuple[list[float], list[float]]] = [([], []) for _ in commands]
    for k in range(args.runs + 1):
        for cmd, (walls, cpus) in zip(commands, figures):
            wall, cpu = tree_cpu_seconds(cmd)
            if cpu is None:
                raise SystemExit("tree_cpu: no writable cgroup v2 hierarchy here (run as root)")
            if k:                        # the first round warms caches and is not counted
                walls.append(wall)
                cpus.append(cpu)
    for cmd, (walls, cpus) in zip(commands, figures):
        print(f"{shlex.join(cmd)[:60]:60}  wall {statistics.median(walls):.2f} s ({min(walls):.2f}-{max(walls):.2f})"
              f"  tree CPU {statistics.median(cpus):.2f} s ({min(cpus):.2f}-{max(cpus):.2f})")


if __name__ == "__main__":
    main()
