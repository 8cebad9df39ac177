"""Benchmark (not a test): grading the distributed parts of the chosen
questions for one submission, from process start, against `python -c
"import torch"` measured in the same run; and the peak memory of all grading
processes together (sum of PSS from /proc/<pid>/smaps_rollup, sampled every
20 ms).

    .venv/bin/python bench/grading_speed.py [--submission DIR] [--runs 3] [--questions 2,3,4]

Targets: wall-time ratio <= 2 (issue 3 for question 4, issue 4 for
everything distributed), peak summed PSS <= 1 GB. The expected values of
part 2.10 (a fully_shard run) are cached on disk after the first grading;
the benchmark measures that steady state.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from shardlab.autograder.platforms.process_memory import PeakSampler

REPO = Path(__file__).resolve().parents[1]


GRADE = """
import sys
from pathlib import Path
from shardlab.autograder.engine.grading import grade_part_ids
from shardlab.autograder.questions import questions
from shardlab.reference.config import load_config
numbers = {int(n) for n in sys.argv[2].split(",")}
ids = [p.id for q in questions() if q.number in numbers for p in q.parts if p.probe == "gloo"]
results = grade_part_ids(Path(sys.argv[1]), load_config(), ids)
print(" ".join(f"{i}={r.score:g}/{r.max_score:g}" for i, r in results.items()))
"""


def timed(cmd: list[str], sample_memory: bool = False) -> tuple[float, int, int, str]:
    """(wall seconds, peak summed PSS in bytes, peak process count, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=REPO)
    sampler = PeakSampler().start(proc.pid) if sample_memory else None
    out = proc.communicate()[0].decode()
    seconds = time.perf_counter() - start
    if sampler:
        sampler.stop()
        return seconds, sampler.peak_bytes, sampler.peak_processes, out
    return seconds, 0, 0, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--submission", default=None, help="folder holding assignments/ (default: solutions)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--questions", default="2,3,4", help="question numbers whose gloo parts are graded")
    args = ap.parse_args()
    from shardlab.autograder.selfcheck import folder_of
    from shardlab.autograder.publish.stubs import SOLUTIONS
    source = Path(args.submission) / "assignments" if args.submission else SOLUTIONS
    with folder_of(source) as root:
        torch_s, grade_s, peaks, procs = [], [], [], []
        for _ in range(args.runs):
            torch_s.append(timed([sys.executable, "-c", "import torch"])[0])
            seconds, peak, n, out = timed([sys.executable, "-c", GRADE, str(root), args.questions],
                                          sample_memory=True)
            grade_s.append(seconds)
            peaks.append(peak)
            procs.append(n)
    t, g = statistics.median(torch_s), statistics.median(grade_s)
    print(f"scores: {out.strip()}")
    print(f"python -c 'import torch': {t:.2f} s (median of {args.runs})")
    print(f"grade the distributed parts of questions {args.questions}: {g:.2f} s (median of {args.runs}); "
          f"ratio {g / t:.2f} (target <= 2)")
    print(f"peak summed PSS of the grading processes: {max(peaks) / 1e6:.0f} MB over up to "
          f"{max(procs)} processes (target <= 1000 MB)")


if __name__ == "__main__":
    main()
