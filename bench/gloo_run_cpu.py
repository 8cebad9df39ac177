"""Benchmark (not a test): what each of a grading's gloo runs costs in CPU,
the whole sandbox counted (trusted ranks, student processes, gloo's threads:
the submission's cgroup's `cpu.stat`), and what a worker group's start costs.

    .venv/bin/python bench/gloo_run_cpu.py [--submission DIR] [--rounds 3]

For each world size of the course's gloo runs (every part with probe="gloo",
public and hidden cases, each distinct run once, public seeds), one group
runs them all once unmeasured (first-call costs), then --rounds times
measured; then --rounds groups of that size are started and killed. Prints
CPU milliseconds per run by scenario, per round, and per group start. Needs
a per-sandbox cgroup (root on this machine). docs/performance.md says what
the figures showed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from shardlab.autograder.core.parts import Call
from shardlab.autograder.engine.plan import part_cases
from shardlab.autograder.questions import questions
from shardlab.autograder.sandbox.gloo.group import GLOO, ForkServer
from shardlab.autograder.sandbox.gloo.launch import _key
from shardlab.autograder.sandbox.gloo.seeds import public_seeds
from shardlab.autograder.sandbox.process import Limits
from shardlab.reference.config import load_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tree_cpu import cgroup_cpu_seconds  # noqa: E402 - a sibling script, not a package


def gloo_runs(cfg) -> dict[int, list[Call]]:
    """The course's distinct gloo runs, by world size: distinct as the grading's gloo probe
    runs them (`launch._key`)."""
    runs: dict[str, Call] = {}
    for question in questions():
        for part in question.parts:
            if part.probe == "gloo":
                for case in part_cases(cfg, part.id):
                    for call in case.calls:
                        runs.setdefault(_key(call), call)
    by_size: dict[int, list[Call]] = defaultdict(list)
    for call in runs.values():
        by_size[int(call.args["world_size"])].append(call)
    return dict(sorted(by_size.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submission", default=None, help="folder holding assignments/ (default: solutions)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from shardlab.autograder.publish.stubs import SOLUTIONS
    from shardlab.autograder.selfcheck import folder_of
    source = Path(args.submission) / "assignments" if args.submission else SOLUTIONS
    with folder_of(source) as root, public_seeds():
        server = ForkServer(str(root), Limits(), GLOO)
        if server.box.cgroup is None or "unified" not in server.box.cgroup.dirs:
            raise SystemExit("gloo_run_cpu: no per-sandbox cgroup here (run as root)")
        folder = server.box.cgroup.dirs["unified"]

        def cpu() -> float:
            return cgroup_cpu_seconds(folder)

        try:
            for size, calls in gloo_runs(load_config()).items():
                group = server.spawn(size)
                for call in calls:                          # first calls: not measured
                    group.run(call, GLOO.scenario_seconds)
                per: dict[str, list[float]] = defaultdict(list)
                began, wall = cpu(), time.perf_counter()
                for _ in range(args.rounds):
                    for call in calls:
                        before = cpu()
                        group.run(call, GLOO.scenario_seconds)
                        per[call.function].append(cpu() - before)
                each_round, wall = (cpu() - began) / args.rounds, (time.perf_counter() - wall) / args.rounds
                group.kill()
                starts = []
                for _ in range(args.rounds):
                    before = cpu()
                    server.spawn(size).kill()
                    time.sleep(0.2)                         # the killed ranks' exits are charged as they end
                    starts.append(cpu() - before)
                print(f"{size} ranks: {len(calls)} runs, {each_round * 1000:.0f} ms CPU a round ({wall * 1000:.0f} ms "
                      f"wall); a group's start and end {statistics.median(starts) * 1000:.0f} ms CPU; per run: "
                      + ", ".join(f"{name} {statistics.mean(v) * 1000:.0f} ms x{len(v) // args.rounds}"
                                  for name, v in per.items()))
        finally:
            server.close()


if __name__ == "__main__":
    main()
