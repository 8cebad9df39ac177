"""`shardlab bench buckets` end to end, as CI runs it (root), without
--submission: the course solutions' BucketedDDP on local gloo ranks, against
the course's cost model (reference/buckets.py)."""
import csv

import pytest

from helpers import run_cli

pytestmark = [pytest.mark.platform, pytest.mark.timeout(300)]


def test_the_experiment_runs_and_writes_its_csv_and_plot(tmp_path):
    r = run_cli("bench", "buckets", "--out", str(tmp_path), "--rounds", "1")
    assert r.returncode == 0, r.stderr[-2000:]
    rows = list(csv.DictReader(open(tmp_path / "buckets.csv")))
    assert [float(row["bucket_mb"]) for row in rows] == [0.25, 0.5, 1, 2, 4, 8, 16, 32, 64]
    assert all(float(row["step_seconds"]) > 0 and float(row["predicted_seconds"]) > 0 for row in rows)
    # 33,685,504 bytes of gradients (128 layers of a 256 KiB weight and a 1 KiB bias): one bucket at 64 MB
    assert [int(row["num_buckets"]) for row in rows][-1] == 1
    sweep = list(csv.DictReader(open(tmp_path / "allreduce.csv")))
    assert len(sweep) == 8 and all(0 < float(row["seconds_q1"]) <= float(row["seconds"]) <= float(row["seconds_q3"])
                                  for row in sweep)
    assert (tmp_path / "buckets.png").read_bytes()[:4] == b"\x89PNG"
    assert "measured best" in r.stdout
