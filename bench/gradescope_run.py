"""Benchmark (not a test): one Gradescope grading run of the solutions,
replayed (`publish.gradescope_replay`, needs root), warm (the
image as setup.sh leaves it, with `shardlab warm`'s cache: every real run)
and cold (the same image with its cache emptied: what every run paid before
the cache moved into the image), against `python -c "import torch"` in the
same environment, measured in the same session. Memory: the run's cgroup
peak (page cache included; Gradescope's limit is a cgroup limit) and the
largest sum of PSS over the run's processes. Warm runs are repeated under
CPU quotas (`--cpus`, Gradescope's default is 1/2 vCPU) to see whether the
solutions still score in full there.

Where a run's seconds go (`breakdown`, medians over the runs of a kind), from
the modification times of the files the run writes (`replay.STAMP_FILES`), so
nothing in the image is changed to measure it: otter's start-up until its
kernel has run the entry file (python, otter's imports of pandas and nbconvert,
the kernel's start); the grading, in its own process from run_autograder's
start (what the kernel's first case still waits for after that); otter's
remaining cases and the kernel's shutdown; otter's exit and the finalize step.

    sudo .venv/bin/python bench/gradescope_run.py [--runs 3]

The README's Gradescope container settings are derived from these peaks.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

from shardlab.autograder.publish import gradescope_replay as replay
from shardlab.autograder.publish.otter_export import build_autograder, config_text
from shardlab.autograder.publish.stubs import SOLUTIONS
from shardlab.reference.config import load_config

MB = 1e6
# (label, from milestone, to milestone) of `replay.Run.stamps`; "start"/"end": the run's own
PHASES = (("otter's start-up, until its kernel ran the entry file", "start", "kernel up"),
          ("the grading, in its own process (run_autograder starts it before otter)", "grading started",
           "report written"),
          ("  of which the kernel's first case waits for", "kernel up", "report written"),
          ("otter's other cases, the kernel's shutdown, results.json", "report written", "otter's results"),
          ("otter's exit and the finalize step", "otter's results", "results final"),
          ("the replay's own teardown (not Gradescope's)", "results final", "end"))


def import_torch_seconds(venv: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], check=True)
    return time.perf_counter() - start


def breakdown(runs: list[replay.Run]) -> list[str]:
    """One line per PHASES entry: its median seconds over `runs` (those whose files were all written)."""
    lines = []
    for label, first, last in PHASES:
        spans = []
        for run in runs:
            at = {"start": 0.0, "end": run.seconds, **(run.stamps or {})}
            if first in at and last in at:
                spans.append(at[last] - at[first])
        if spans:
            lines.append(f"    {statistics.median(spans):5.2f} s  {label}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cpus", default="0.5,1.0", help="CPU quotas for extra warm runs (Gradescope's default: 0.5)")
    args = ap.parse_args()
    base = replay.scratch()
    try:
        zip_path = build_autograder(load_config(None), config_text(None), base / "zip")
        venv = replay.make_env(base)
        status, log = replay.build_image(zip_path, venv, base / "warm", base / "build")
        if status:
            raise SystemExit(f"the image build failed:\n{log[-2000:]}")
        shutil.copytree(base / "warm", base / "cold", symlinks=True)
        shutil.rmtree(base / "cold" / "shardlab-cache")
        upload = base / "upload"
        shutil.copytree(SOLUTIONS, upload / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
        metadata = replay.gradescope_metadata([{"email": "ada@example.edu", "id": 42, "name": "Ada"}])
        quotas = [float(c) for c in args.cpus.split(",") if c]
        kinds = {"warm": ("warm", None), "cold": ("cold", None),
                 **{f"warm, {c:g} CPU": ("warm", c) for c in quotas}}
        runs: dict[str, list[replay.Run]] = {kind: [] for kind in kinds}
        torch_s, loads = [], []
        for k in range(args.runs):
            torch_s.append(import_torch_seconds(venv))
            for kind, (image, cpus) in kinds.items():
                loads.append(os.getloadavg()[0])
                run = replay.replay(base / image, venv, upload, metadata, base / f"run-{k}", cpus=cpus)
                if run.results is None:
                    raise SystemExit(f"the {kind} run wrote no results.json:\n{run.log[-2000:]}")
                runs[kind].append(run)
        t = statistics.median(torch_s)
        def score(run):
            return sum(float(x["score"]) for x in run.results["tests"] if "score" in x)
        print(f"load average {min(loads):.1f}-{max(loads):.1f} during the runs")
        print(f"python -c 'import torch' (the replay's env): {t:.2f} s (median of {args.runs})")
        for kind, rs in runs.items():
            s = statistics.median(r.seconds for r in rs)
            cg = [r.peak_cgroup_bytes for r in rs if r.peak_cgroup_bytes]
            cgroup = f"peak cgroup memory {max(cg) / MB:.0f} MB" if cg else "no cgroup peak here"
            print(f"{kind}: {s:.1f} s per run (median of {len(rs)}; {s / t:.1f}x import torch), "
                  f"peak summed PSS {max(r.peak_pss_bytes for r in rs) / MB:.0f} MB, {cgroup}; "
                  f"solutions scored {', '.join(f'{score(r):g}' for r in rs)}")
            print("\n".join(breakdown(rs)))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
