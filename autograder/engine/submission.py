"""Find the `assignments/` folder of a submission (a folder or a zip) and
hand the grader a staged copy of it.

Whatever the upload's shape (folder, git checkout, zip), the grader only
ever reads the copy `sandbox.staging` makes: plain files and folders,
no links followed, sizes capped. A zip is refused before unpacking when a
member would land outside the folder or is anything but a file or folder
(a symlink, a device, a FIFO...); locating assignments/ never follows a link.
"""
from __future__ import annotations

import os
import stat
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.sandbox.staging import MAX_BYTES, kind_of, refusal, stage
from shardlab.autograder.sandbox.untrusted import one_line

MAX_UNPACKED_BYTES = MAX_BYTES
MAX_ZIP_MEMBERS = 10_000
SUBMITTED_FILES = ("answers.toml", "writeup.md")   # beside assignments/: `answer_sheet`, `writeup`


def _is_plain_dir(path: Path) -> bool:
    """A folder, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _subfolders(folder: Path) -> list[Path]:
    """Plain subfolders worth looking into: not links, not hidden or
    tool-made (`.git`, `__MACOSX`, `__pycache__`), not otter's own tests/."""
    try:
        children = list(folder.iterdir())
    except OSError:
        return []
    return [p for p in children if _is_plain_dir(p) and not p.name.startswith(("_", "."))
            and p.name != "tests"]


def find_assignments(folder: Path) -> Path | None:
    """The folder holding assignments/ in an upload: `folder` itself, its
    parent when `folder` is assignments/, or the one subfolder at most two
    levels down that holds it. None when there is none, or more than one.
    A link named assignments/ counts as found (staging then refuses it by
    name); a linked subfolder is never looked into. Every front end (the
    CLI, batch grading, otter) finds a submission with this function."""
    if os.path.lexists(folder / "assignments"):
        return folder
    if folder.name == "assignments" and _is_plain_dir(folder):
        return folder.parent
    one_down = _subfolders(folder)
    found = [p for p in one_down if os.path.lexists(p / "assignments")]
    found += [q for p in one_down for q in _subfolders(p) if os.path.lexists(q / "assignments")]
    return found[0] if len(found) == 1 else None


def _root_of(folder: Path, shown: str) -> Path:
    root = find_assignments(folder)
    if root is None:
        raise ShardlabError(f"not a submission: {shown} holds no assignments/ folder")
    return root


def _check_zip(path: Path, members: list[zipfile.ZipInfo], into: Path) -> None:
    """Refuse a zip that is too big, writes outside `into` or holds anything
    but files and folders (the mode a Unix zip keeps in external_attr)."""
    if len(members) > MAX_ZIP_MEMBERS:
        raise ShardlabError(f"submission {path} holds more than {MAX_ZIP_MEMBERS} files")
    if sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
        raise ShardlabError(f"submission {path} unpacks to more than {MAX_UNPACKED_BYTES // 2**20} MiB")
    for m in members:
        target = (into / m.filename).resolve()
        if not target.is_relative_to(into.resolve()):
            raise ShardlabError(f"submission {path} has an unsafe path: {one_line(m.filename, 200)}")
        kind = stat.S_IFMT(m.external_attr >> 16)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise refusal(m.filename.rstrip("/"), f"is {kind_of(kind)}")


@contextmanager
def open_submission(path: str | Path) -> Iterator[Path]:
    """Yield the root of a staged copy (it holds assignments/ and the
    SUBMITTED_FILES present) of a folder or zip submission."""
    path = Path(path)
    if not path.exists():
        raise ShardlabError(f"no such file or folder: {path}")
    if not path.is_dir() and not zipfile.is_zipfile(path):
        raise ShardlabError(f"not a submission: {path} is neither a folder nor a zip file")
    with tempfile.TemporaryDirectory(prefix="shardlab-sub-") as tmp:
        if path.is_dir():
            found = _root_of(path, str(path))
        else:
            unpacked = Path(tmp) / "unpacked"
            unpacked.mkdir()
            with zipfile.ZipFile(path) as zf:
                _check_zip(path, zf.infolist(), unpacked)
                zf.extractall(unpacked)
            found = _root_of(unpacked, str(path))
        yield stage(found, Path(tmp) / "staged", also=SUBMITTED_FILES)
