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

Nobody else can poison or jam it (docs/trust.md, "The cache"):

- before first use in a process, the folder is checked (`usable_folder`): it
  must be the grader's user's; its mode is set back to 0700 if it is not; if
  others could read or write it (a group or other bit), everything in it is
  discarded and made again, since its keys may have been read;
- every cached value carries an HMAC keyed with the folder's own integrity
  key (`integrity-key`, 0600, the grader's alone: `private_bytes`), over its
  file name and its value; a value that fails (rewritten, truncated,
  unreadable, a link) is computed again and rewritten, and stderr says so;
- a folder that cannot be made, read or written, or is another user's, is
  graded without: every value computed afresh, the data seed pool drawn for
  this process only, and stderr says once which folder and what to do.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import stat
import sys
from collections.abc import Iterator
from functools import lru_cache
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


@lru_cache(maxsize=None)
def _source_digest(modules: tuple[str, ...]) -> str:
    """A digest of these modules' source files, found without importing them; a package counts
    with every .py file under it, at any depth (its subpackages and their modules), by path."""
    from importlib.util import find_spec
    digest = hashlib.sha256()
    for name in modules:
        spec = find_spec(name)
        assert spec is not None and spec.origin is not None, name      # the course's own source files
        if spec.submodule_search_locations:
            for top in map(Path, spec.submodule_search_locations):
                for path in sorted(top.rglob("*.py")):
                    digest.update(f"{name}/{path.relative_to(top).as_posix()}\0".encode())
                    digest.update(path.read_bytes())
        else:
            digest.update(Path(spec.origin).read_bytes())
    return digest.hexdigest()


def once_per_machine(name: str, args: dict, compute: Callable[[], Any], depends_on: tuple[str, ...] = (),
                     folder: Path | None = None) -> Any:
    """compute()'s JSON result for these arguments, computed once per machine, torch
    release and source of the modules it `depends_on` (the code that computes it, so an
    edited reference is never answered from an old cache), kept in `folder` (cache_dir())
    as <name>-<key>.json with its HMAC, written atomically, the folder private to the grader's
    user. For deterministic reference results only. A value that fails its check is computed
    again; a folder that cannot be used, or a value that cannot be written, only costs
    computing again (module docstring)."""
    folder = folder or cache_dir()
    if not usable_folder(folder):
        return compute()
    key = hashlib.sha256(json.dumps([args, torch_release(), _source_digest(depends_on), CACHE_FORMAT],
                                    sort_keys=True).encode()).hexdigest()[:24]
    cached = folder / f"{name}-{key}.json"
    found = _read_checked(cached)
    if found:
        return found[0]
    with _computing(folder, cached.with_suffix(".lock")):
        found = _read_checked(cached, quiet=True)
        if found:                       # another grader computed it while this one waited
            return found[0]
        value = compute()
        try:
            tmp_file = cached.with_suffix(f".tmp{os.getpid()}")
            _write_private(tmp_file, json.dumps({"value": value, "mac": _mac(cached, value)}).encode())
            os.replace(tmp_file, cached)
        except OSError:
            pass
    return value


INTEGRITY_KEY = "integrity-key"
# Part of every value's key: a grader that writes values in another layout (before the HMAC, plain JSON)
# never reads this one's files, nor this one its (an older checkout beside a newer one on one machine).
CACHE_FORMAT = "value+mac"


def say(line: str) -> None:
    """One line to the grader's log (stderr): what it did about its cache."""
    print(f"shardlab cache: {line}", file=sys.stderr, flush=True)


def _mac(path: Path, value: Any) -> str:
    """The HMAC of a cached value, over its file name (a value moved to another name fails) and its JSON."""
    key = private_bytes(path.parent / INTEGRITY_KEY, lambda: os.urandom(32).hex().encode())
    text = json.dumps([path.name, value], sort_keys=True).encode()
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def _read_checked(path: Path, quiet: bool = False) -> tuple[Any] | None:
    """(value,) if `path` holds a value whose HMAC checks; None if it holds none (missing: said only when
    it was there and failed, unless `quiet`)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if not quiet:
            say(f"{path} could not be read ({exc.strerror}): computed again")
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read()
    try:
        stored = json.loads(data)
        value, mac = stored["value"], stored["mac"]
        ok = isinstance(mac, str) and hmac.compare_digest(mac, _mac(path, value))
    except (ValueError, TypeError, KeyError, RecursionError):
        ok = False
    if ok:
        return (value,)
    if not quiet:
        say(f"{path} failed its integrity check (changed by someone else, or an older grader's): computed again")
    return None


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def private_bytes(path: Path, make: Callable[[], bytes]) -> bytes:
    """The contents of a secret file of the cache (the integrity key, the data seed pool), made with
    `make()` if missing (the first writer wins a race). One that is not a plain file of the grader's user
    with mode 0600, or is empty, is replaced: others may have read or written it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = -1
    except OSError:             # a link, or unreadable: not the grader's as it should be
        fd = -2
    if fd >= 0:
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            data = f.read()
        if stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid() and info.st_mode & 0o777 == 0o600 and data:
            return data
    if fd != -1:
        say(f"{path} was not the grader's alone (owner, mode or contents changed): made anew")
        path.unlink(missing_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    _write_private(tmp, make())
    try:
        os.link(tmp, path)             # first writer wins; a racing grader reads the winner's
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return private_bytes(path, make)


@lru_cache(maxsize=None)
def usable_folder(folder: Path) -> bool:
    """Whether the cache may be used here (checked once per process and folder): made if missing, the
    grader's user's, mode 0700 (set back if not; a folder others could read or write is emptied: its
    keys and values may have been read or forged). False, after one line naming the folder and the
    remedy, where it cannot be: the grading then goes on without it."""
    remedy = f"grading without a cache; to fix it, remove {folder} or set {CACHE_ENV} to a folder of your own"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = os.stat(folder)
        if info.st_uid != os.geteuid():
            say(f"{folder} belongs to uid {info.st_uid}, not the grader's ({os.geteuid()}): {remedy}")
            return False
        if info.st_mode & 0o077:
            say(f"{folder} was mode {info.st_mode & 0o777:04o} (others could read or change it): "
                "its keys and values are discarded and made again")
            folder.chmod(0o700)
            for entry in os.scandir(folder):
                if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                    os.unlink(entry.path)
        elif info.st_mode & 0o700 != 0o700:
            folder.chmod(0o700)
        probe = folder / f".probe-{os.getpid()}"
        _write_private(probe, b"")
        probe.unlink()
        os.listdir(folder)
    except OSError as exc:
        say(f"{folder} cannot be used ({exc.strerror or exc}): {remedy}")
        return False
    return True


@contextlib.contextmanager
def _computing(folder: Path, lock: Path) -> Iterator[None]:
    """Held while one value is computed: an exclusive lock (flock) on its own file, so that
    graders needing the same value at once (a batch's first submissions on a cold machine, the
    test suite's two workers) compute it once, the others waiting for it, not each computing it
    (a `fully_shard` reference costs seconds of both cores). The kernel drops the lock of a
    grader that dies. Where the folder cannot be written, nothing is locked."""
    try:
        handle = open(lock, "a")
    except OSError:
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield                                            # closing the file drops the lock
