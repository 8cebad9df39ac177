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

The key is the machine's own (made once, mode 0600, in the grader's cache
folder, so cached reference runs stay valid), or SHARDLAB_DATA_SEED_KEY when
set (a batch of graders sharing a cache; SHARDLAB_GRADING_SECRET, its
earlier name, is still read). It is not the course's `[course] secret`,
which keys per-student variants and answer sheets.

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
from functools import lru_cache
from pathlib import Path

from shardlab.reference.cache import cache_dir


_PUBLIC = contextvars.ContextVar("shardlab_public_seeds", default=False)


def _key_file() -> Path:
    return cache_dir() / "data-seed-key"


@lru_cache(maxsize=1)
def data_seed_key() -> bytes:
    """The HMAC key of `data_seed`: the environment's, else this machine's own."""
    for name in ("SHARDLAB_DATA_SEED_KEY", "SHARDLAB_GRADING_SECRET"):
        if os.environ.get(name):
            return os.environ[name].encode()
    path = _key_file()
    for known in (path, path.with_name("grading-secret")):    # the key's file under its earlier name too
        try:
            return known.read_bytes()
        except FileNotFoundError:
            pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32).hex().encode())
    try:
        os.link(tmp, path)             # first writer wins; a racing grader reads the winner's
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_bytes()


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
