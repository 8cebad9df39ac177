"""Benchmark (not a test): submissions graded per minute by
`shardlab grade PATH... --jobs 2 --out DIR` for a batch of 20 mixed
submissions (solutions, stubs and the hand-made wrong and hostile ones of
tests/submissions/, as zips), on this machine.

    .venv/bin/python bench/batch_throughput.py [--count 20] [--jobs 2]

Target (issue 6): at least 15 submissions per minute with --jobs 2.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]



def make_batch(folder: Path, count: int) -> list[str]:
    """`count` zips cycling through solutions, stubs and every fixture."""
    from shardlab.autograder.selfcheck import assembled, fixtures, folder_of
    from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS
    sources = [("solutions", lambda: folder_of(SOLUTIONS)), ("stubs", lambda: folder_of(ASSIGNMENTS))]
    sources += [(fx.name, lambda fx=fx: assembled(fx)) for fx in fixtures()]
    paths = []
    for i, (name, open_source) in zip(range(count), itertools.cycle(sources)):
        with open_source() as root:
            paths.append(shutil.make_archive(str(folder / f"{i:02d}-{name}"), "zip", root))
    return paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="shardlab-batch-") as tmp:
        paths = make_batch(Path(tmp), args.count)
        out = Path(tmp) / "out"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "shardlab.autograder.cli", "grade", *paths, "--jobs", str(args.jobs),
                        "--out", str(out)], check=True, cwd=REPO, capture_output=True)
        seconds = time.perf_counter() - start
        rows = list(csv.DictReader((out / "gradebook.csv").open()))
    errors = sum(r["status"] != "ok" for r in rows)
    print(f"{len(rows)} submissions ({errors} error rows) in {seconds:.1f} s with --jobs {args.jobs}: "
          f"{60 * len(rows) / seconds:.1f} per minute (target >= 15)")


if __name__ == "__main__":
    main()
