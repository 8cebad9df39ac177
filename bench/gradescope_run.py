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


def import_torch_seconds(venv: Path) -> float:
    start = time.perf_counter()
    subprocess.run([str(venv / "bin" / "python"), "-c", "import torch"], check=True)
    return time.perf_counter() - start


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
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
