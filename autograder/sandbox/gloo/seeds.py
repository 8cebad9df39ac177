"""The seed every distributed run draws its data and initial weights from is
known only to the grader.

A part's cases carry a public seed (it is in the feedback). The runs use
`data_seed(seed)`, a keyed hash of it with the data seed key, which never
enters a student's process: each rank's trusted process draws the rows and
weights, and hands the student's process only its own. Without the key, no rank
can reproduce single-process training on the whole batch by itself: the
other ranks' data reaches it only through collectives, which the trusted
processes perform and record. The grader computes the expected values with
the same keyed seed.

The key is one of the machine's pool of POOL_SIZE keys (made once, mode
0600, in the grader's cache folder, so cached reference runs stay valid;
`shardlab warm` fills the cache for every key of the pool, so a grading's
own cost does not grow with it). A grading picks it by the contents of the
submission's code (`submission_key`, keyed with the pool's first key): the
same files get the same data, so the same grade and feedback, in every
grading process, and a changed submission's data is the earlier one's only
with probability 1/POOL_SIZE (docs/trust.md, "Data seeds"). A process with
no submission to key by draws one key at random, once. SHARDLAB_DATA_SEED_KEY, when set,
is the one key instead (SHARDLAB_GRADING_SECRET, its earlier name, is still
read). None of them is the course's `[course] secret`, which keys
per-student variants and answer sheets.

The starter kit runs the public cases on the student's machine with the
public seed itself: its expected values are computed at `shardlab build`
inside `public_seeds()` (by `kit_harness.public_runs`), where `data_seed` is the
identity. Grading never enters it, and a kit's run says nothing of the
keyed seeds a grading uses.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import hmac
import os
import secrets
from functools import lru_cache
from pathlib import Path

from shardlab.reference.cache import cache_dir, private_bytes, usable_folder


_PUBLIC = contextvars.ContextVar("shardlab_public_seeds", default=False)


# keys in a new pool: `make bench` (bench/seed_pool.py) weighs the set-up time and the cache's size
# against it (docs/performance.md); SHARDLAB_DATA_SEED_POOL_SIZE overrides it for a pool not yet made
POOL_SIZE = 8
POOL_SIZE_ENV = "SHARDLAB_DATA_SEED_POOL_SIZE"
_CHOSEN: contextvars.ContextVar[int | None] = contextvars.ContextVar("shardlab_pool_key", default=None)


def _pool_file() -> Path:
    return cache_dir() / "data-seed-keys"


@lru_cache(maxsize=1)
def data_seed_pool() -> tuple[bytes, ...]:
    """Every key a grading may draw: the environment's one key, else this machine's pool
    (POOL_SIZE random keys, one per line, written once, 0600, the grader's alone:
    `cache.private_bytes` makes it anew if anyone else could have read it); where the cache folder
    cannot be used (`cache.usable_folder`), a pool of this process's own."""
    for name in ("SHARDLAB_DATA_SEED_KEY", "SHARDLAB_GRADING_SECRET"):
        if os.environ.get(name):
            return (os.environ[name].encode(),)
    if not usable_folder(cache_dir()):
        return _parse_pool(_new_pool())
    return _parse_pool(private_bytes(_pool_file(), _new_pool))


def _new_pool() -> bytes:
    size = max(1, int(os.environ.get(POOL_SIZE_ENV) or POOL_SIZE))
    return b"".join(os.urandom(32).hex().encode() + b"\n" for _ in range(size))


def _parse_pool(data: bytes) -> tuple[bytes, ...]:
    return tuple(line.strip() for line in data.splitlines() if line.strip())


@lru_cache(maxsize=1)
def _drawn() -> int:
    """This process's key: one draw, unpredictable to any student process."""
    return secrets.randbelow(len(data_seed_pool()))


def key_index() -> int:
    """Which key of the pool this grading's runs use (not secret: the keys are)."""
    chosen = _CHOSEN.get()
    return _drawn() if chosen is None else chosen


def seeds_in_use() -> str:
    """Which seeds runs use now, as a cache key: "public" (the kit's build) or the pool's key index."""
    return "public" if _PUBLIC.get() else f"key {key_index()}"


def data_seed_key() -> bytes:
    """The HMAC key of `data_seed` for this grading."""
    return data_seed_pool()[key_index()]


@contextlib.contextmanager
def pool_key(index: int):
    """Within: the runs use key `index` of the pool (`shardlab warm` fills the cache for each)."""
    token = _CHOSEN.set(index)
    try:
        yield
    finally:
        _CHOSEN.reset(token)


def submission_key(root: Path) -> int:
    """The pool key a grading of the submission at `root` uses: chosen by its code's contents
    (every file under assignments/, by relative path and bytes), keyed with the pool's first key, so the
    same files get the same data, and the same grade and feedback, in every grading process,
    while no student can tell which key their files pick (docs/trust.md, "Data seeds")."""
    pool = data_seed_pool()
    if len(pool) == 1:
        return 0
    digest = hmac.new(pool[0], b"submission", hashlib.sha256)
    code = Path(root) / "assignments"
    for path in sorted(p for p in code.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(code)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return int.from_bytes(digest.digest()[:8], "big") % len(pool)


@contextlib.contextmanager
def submission_pool_key(root: Path):
    """Within: the runs use the key the submission's files pick (`submission_key`), unless a
    key was already chosen (`pool_key`: `shardlab warm`, a test) or the seeds are public."""
    if _CHOSEN.get() is not None or _PUBLIC.get():
        yield
        return
    with pool_key(submission_key(root)):
        yield


def data_seed(seed: int) -> int:
    """The seed a run really uses for the public case seed `seed` (31 bits)."""
    if _PUBLIC.get():
        return seed
    digest = hmac.new(data_seed_key(), f"data:{seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@contextlib.contextmanager
def public_seeds():
    """Within: every run uses its public seed as is (the starter kit's runs)."""
    token = _PUBLIC.set(True)
    try:
        yield
    finally:
        _PUBLIC.reset(token)
