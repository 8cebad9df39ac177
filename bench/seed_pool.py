"""Benchmark (not a test): what the pool of data seed keys costs the set-up.

Each grading draws one key of the pool (`sandbox.gloo.seeds`), and `shardlab
warm` (the Gradescope image's setup.sh) computes every distributed part's
expected values once per key, so the pool's size K costs set-up time and
cache bytes (in the image), never a grading's time. This runs `shardlab
warm` in a fresh cache folder for each K, the K = 1 baseline beside each
(A B A B ..., so the ratio holds when the machine's speed drifts), and
prints the wall-time ratio and the cache's size.

    .venv/bin/python bench/seed_pool.py [--sizes 1,4,8,16] [--runs 1] [--config FILE]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def warm(size: int, config: str | None) -> tuple[float, int]:
    """(wall seconds, cache bytes) of one `shardlab warm` with a new pool of `size` keys."""
    cache = Path(tempfile.mkdtemp(prefix="shardlab-bench-pool-"))
    env = {**os.environ, "SHARDLAB_CACHE_DIR": str(cache), "SHARDLAB_DATA_SEED_POOL_SIZE": str(size)}
    env.pop("SHARDLAB_DATA_SEED_KEY", None)
    start = time.monotonic()
    subprocess.run([sys.executable, "-m", "shardlab.autograder.cli", "warm", *(["--config", config] if config else [])],
                   env=env, check=True, capture_output=True, cwd=REPO)
    seconds = time.monotonic() - start
    size_bytes = sum(p.stat().st_size for p in cache.rglob("*") if p.is_file())
    shutil.rmtree(cache)
    return seconds, size_bytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4,8,16")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--config")
    args = parser.parse_args()
    print(f"load {os.getloadavg()[0]:.1f}; shardlab warm per pool size K, against K = 1 in the same run")
    print("| K | warm, wall s (median) | against K = 1 | cache |")
    print("|---|---|---|---|")
    for size in map(int, args.sizes.split(",")):
        pairs = [(warm(size, args.config), warm(1, args.config)) for _ in range(args.runs)]
        ratio = statistics.median(a[0] / b[0] for a, b in pairs)
        seconds = statistics.median(a[0] for a, _ in pairs)
        cache_kib = statistics.median(a[1] for a, _ in pairs) / 1024
        print(f"| {size} | {seconds:.1f} | {ratio:.2f}x | {cache_kib:,.0f} KiB |", flush=True)


if __name__ == "__main__":
    main()
