"""The seed every distributed run draws its data and initial weights from is
known only to the grader.

A part's cases carry a public seed (it is in the feedback). The runs use
`data_seed(seed)`, a keyed hash of it with a secret that never enters a
student's process: each rank's trusted process draws the rows and weights,
and hands the student's process only its own. Without the secret, no rank
can reproduce single-process training on the whole batch by itself: the
other ranks' data reaches it only through collectives, which the trusted
processes perform and record. The grader computes the expected values with
the same keyed seed.

The secret is the machine's own (made once, mode 0600, in the grader's
cache folder, reference/cache.py, so cached reference runs stay valid), or
SHARDLAB_GRADING_SECRET when set (a batch of graders sharing a cache).

The starter kit runs the public cases on the student's machine with the
public seed itself: its expected values are computed at `shardlab build`
inside `public_seeds()` (publish/kit_harness.py), where `data_seed` is the
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


def _secret_file() -> Path:
    return cache_dir() / "grading-secret"


@lru_cache(maxsize=1)
def grading_secret() -> bytes:
    if os.environ.get("SHARDLAB_GRADING_SECRET"):
        return os.environ["SHARDLAB_GRADING_SECRET"].encode()
    path = _secret_file()
    try:
        return path.read_bytes()
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
    digest = hmac.new(grading_secret(), f"data:{seed}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@contextlib.contextmanager
def public_seeds():
    """Within: every run uses its public seed as is (the starter kit's runs)."""
    token = _PUBLIC.set(True)
    try:
        yield
    finally:
        _PUBLIC.reset(token)
