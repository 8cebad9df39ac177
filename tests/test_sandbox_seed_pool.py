"""Data no submission can harvest for the next (issue 30, item 5).

Every distributed run draws its rows and initial weights from a keyed seed
(`sandbox.gloo.seeds`). With one key per machine, every submission on a
Gradescope image saw the same data, so a student who printed their ranks'
rows in one submission knew the next one's. Now each grading process draws
one key of a pool at random, and `shardlab warm` fills the cache for every
key, so no grading pays for the pool.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from shardlab.autograder.engine import plan
from shardlab.autograder.sandbox.gloo import seeds

SEED = 122


def _fresh_pool(monkeypatch, tmp_path, size: int | None = None):
    monkeypatch.setenv("SHARDLAB_CACHE_DIR", str(tmp_path))
    for name in ("SHARDLAB_DATA_SEED_KEY", "SHARDLAB_GRADING_SECRET"):
        monkeypatch.delenv(name, raising=False)
    if size is None:
        monkeypatch.delenv(seeds.POOL_SIZE_ENV, raising=False)      # the default pool (conftest sets 2)
    else:
        monkeypatch.setenv(seeds.POOL_SIZE_ENV, str(size))
    seeds.data_seed_pool.cache_clear()
    seeds._drawn.cache_clear()


@pytest.fixture
def fresh_pool(monkeypatch, tmp_path):
    _fresh_pool(monkeypatch, tmp_path)
    yield tmp_path
    seeds.data_seed_pool.cache_clear()
    seeds._drawn.cache_clear()


@pytest.mark.pure
def test_the_pool_is_private_and_its_keys_give_different_data(fresh_pool):
    pool = seeds.data_seed_pool()
    assert len(pool) == seeds.POOL_SIZE == len(set(pool))
    assert (fresh_pool / "data-seed-keys").stat().st_mode & 0o777 == 0o600
    per_key = []
    for index in range(len(pool)):
        with seeds.pool_key(index):
            per_key.append(seeds.data_seed(SEED))
            assert seeds.seeds_in_use() == f"key {index}"
    assert len(set(per_key)) == len(pool)
    with seeds.public_seeds():
        assert seeds.data_seed(SEED) == SEED and seeds.seeds_in_use() == "public"


@pytest.mark.pure
def test_warm_fills_the_cache_for_every_key(fresh_pool, monkeypatch, cfg):
    """`shardlab warm` computes each distributed part's expected values once per key of the pool."""
    seen: dict[str, set[str]] = {}

    def recorded(course, part_id):
        seen.setdefault(part_id, set()).add(seeds.seeds_in_use())
        return [], None
    monkeypatch.setattr(plan, "expected_or_error", recorded)
    assert plan.warm(cfg) == {}
    every_key = {f"key {i}" for i in range(seeds.POOL_SIZE)}
    gloo = [p.id for p in plan.all_parts(cfg) if p.kind == "auto" and p.probe == "gloo"]
    assert gloo and all(seen[pid] == every_key for pid in gloo)


@pytest.mark.sandbox
def test_each_grading_process_draws_its_own_key(fresh_pool):
    """The attack: learn the data in one grading and reuse it in the next. Twelve grading
    processes on one machine (as twelve Gradescope runs of one image) do not all use the
    same data; each uses one of the pool's (all twelve alike: chance 8 * (1/8)**12 < 1e-9)."""
    with_keys = {}
    for index in range(seeds.POOL_SIZE):
        with seeds.pool_key(index):
            with_keys[seeds.data_seed(SEED)] = index
    code = ("from shardlab.autograder.sandbox.gloo.seeds import data_seed\n"
            f"print(data_seed({SEED}))")
    env = {**os.environ, "SHARDLAB_CACHE_DIR": str(fresh_pool)}      # the pool made above: 8 keys
    drawn = [int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                timeout=120, check=True).stdout) for _ in range(12)]
    assert set(drawn) <= set(with_keys) and len(set(drawn)) > 1, drawn


def _submission(root, text: str):
    (root / "assignments").mkdir(parents=True, exist_ok=True)
    (root / "assignments" / "buckets.py").write_text(text)
    return root


@pytest.mark.pure
def test_the_same_files_pick_the_same_key_in_every_process(fresh_pool, tmp_path):
    """Issue 43: grading the same submission again gives the same data, so the same score and
    feedback; files that differ pick keys spread over the pool, which no student can predict."""
    root = _submission(tmp_path / "one", "x = 1\n")
    key = seeds.submission_key(root)
    code = ("from pathlib import Path\nfrom shardlab.autograder.sandbox.gloo.seeds import submission_key\n"
            f"print(submission_key(Path({str(root)!r})))")
    env = {**os.environ, "SHARDLAB_CACHE_DIR": str(fresh_pool)}
    others = {int(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                 timeout=120, check=True).stdout) for _ in range(2)}
    assert others == {key}
    picked = {seeds.submission_key(_submission(tmp_path / f"v{i}", f"x = {i}\n")) for i in range(40)}
    assert len(picked) > 1 and picked <= set(range(seeds.POOL_SIZE))
    with seeds.submission_pool_key(root):
        assert seeds.seeds_in_use() == f"key {key}"
        with seeds.pool_key((key + 1) % seeds.POOL_SIZE), seeds.submission_pool_key(root):
            assert seeds.seeds_in_use() == f"key {(key + 1) % seeds.POOL_SIZE}"     # a chosen key stands
    with seeds.public_seeds(), seeds.submission_pool_key(root):
        assert seeds.seeds_in_use() == "public"
