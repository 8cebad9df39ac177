"""Where the grader keeps what it computes once per machine: the grading
secret behind every distributed run's data (`sandbox.gloo.seeds`)
and the expected values of reference runs that are too slow to repeat per
submission (the `fully_shard` agreement, `fsdp2_agreement`).

The folder is `$SHARDLAB_CACHE_DIR` when set, else `$XDG_CACHE_HOME/shardlab`,
else `~/.cache/shardlab`. The Gradescope zip sets SHARDLAB_CACHE_DIR to a
folder inside `/autograder/source/`, which its setup.sh fills while the
image is built (`shardlab warm`), so every grading run starts warm whatever
HOME the container gives it. Only the grader's user may read it: the secret
and the expected values are part of the answer key.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections.abc import Iterator
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable

CACHE_ENV = "SHARDLAB_CACHE_DIR"


def cache_dir() -> Path:
    """The cache folder (not created here)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shardlab"


def torch_release() -> str:
    """The installed torch's version, read from its metadata: importing torch costs
    seconds, and a cache hit should not pay them."""
    try:
        return version("torch")
    except PackageNotFoundError:
        return "none"


def _source_digest(modules: tuple[str, ...]) -> str:
    """A digest of these modules' source files, found without importing them."""
    from importlib.util import find_spec
    digest = hashlib.sha256()
    for name in modules:
        spec = find_spec(name)
        assert spec is not None and spec.origin is not None, name      # the course's own source files
        digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()


def once_per_machine(name: str, args: dict, compute: Callable[[], Any], depends_on: tuple[str, ...] = (),
                     folder: Path | None = None) -> Any:
    """compute()'s JSON result for these arguments, computed once per machine, torch
    release and source of the modules it `depends_on` (the code that computes it, so an
    edited reference is never answered from an old cache), kept in `folder` (cache_dir())
    as <name>-<key>.json, written atomically, the folder private to the grader's user.
    For deterministic reference results only. A folder that cannot be written only costs
    computing again."""
    folder = folder or cache_dir()
    key = hashlib.sha256(json.dumps([args, torch_release(), _source_digest(depends_on)],
                                    sort_keys=True).encode()).hexdigest()[:24]
    cached = folder / f"{name}-{key}.json"
    if cached.is_file():
        return json.loads(cached.read_text())
    with _computing(folder, cached.with_suffix(".lock")):
        if cached.is_file():            # another grader computed it while this one waited
            return json.loads(cached.read_text())
        value = compute()
        try:
            tmp_file = cached.with_suffix(f".tmp{os.getpid()}")
            tmp_file.write_text(json.dumps(value))
            os.replace(tmp_file, cached)
        except OSError:
            pass
    return value


@contextlib.contextmanager
def _computing(folder: Path, lock: Path) -> Iterator[None]:
    """Held while one value is computed: an exclusive lock (flock) on its own file, so that
    graders needing the same value at once (a batch's first submissions on a cold machine, the
    test suite's two workers) compute it once, the others waiting for it, not each computing it
    (a `fully_shard` reference costs seconds of both cores). The kernel drops the lock of a
    grader that dies. Where the folder cannot be written, nothing is locked."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o700)                              # expected values: the grader's alone
        handle = open(lock, "a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield                                            # closing the file drops the lock
