"""Find the `assignments/` folder of a submission (a folder or a zip) and
hand the grader a staged copy of it.

Whatever the upload's shape (folder, git checkout, zip), the grader only
ever reads the copy `sandbox.staging` makes: plain files and folders,
no links followed, sizes capped. A zip is refused before unpacking when a
member would land outside the folder or is anything but a file or folder
(a symlink, a device, a FIFO...); locating assignments/ never follows a link.

An upload with no assignments/ folder to grade (none within SEARCH_DEPTH
folders, or more than one) is the student's bad upload, not the
instructor's wrong path: `NotASubmission` carries the one sentence that
says what was expected, and `grading.grade_path` scores it 0 with it.
"""
from __future__ import annotations

import errno
import os
import stat
import struct
import tempfile
import zipfile
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from shardlab.autograder.core.errors import ShardlabError, SubmissionRefused
from shardlab.autograder.sandbox import leftovers
from shardlab.autograder.sandbox.staging import MAX_BYTES, kind_of, refusal, stage
from shardlab.autograder.sandbox.untrusted import one_line

MAX_UNPACKED_BYTES = MAX_BYTES
MAX_ZIP_MEMBERS = 10_000
SUBMITTED_FILES = ("answers.toml", "writeup.md")   # beside assignments/: `answer_sheet`, `writeup`
SEARCH_DEPTH = 4            # find_assignments looks this many folders down
MAX_FOLDERS_SEARCHED = 5000  # ... and into at most this many folders (a virtualenv uploaded by mistake)
MAX_NAMED = 3               # candidates a sentence names
NO_ASSIGNMENTS = ("the upload holds no assignments/ folder: upload the starter kit's folder (or a zip of it) "
                  "with assignments/ inside")


class NotASubmission(SubmissionRefused):
    """An upload with no assignments/ folder to grade (none, or more than
    one): a student's bad upload. Its message is the one sentence the
    student reads (`no_assignments_sentence`); `grading.grade_path` scores
    it 0 with it, any other caller shows it as a one-line error."""


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


def assignments_candidates(folder: Path) -> list[Path]:
    """Every folder holding assignments/ in an upload: `folder` itself, its
    parent when `folder` is assignments/, else each subfolder at most
    SEARCH_DEPTH levels down that holds one, shallowest first, in name order
    (a folder holding assignments/ is not looked into further: its own
    subfolders are its kit's). A link named assignments/ counts as found
    (staging then refuses it by name); a linked subfolder is never looked
    into, nor hidden, tool-made or tests/ ones (`_subfolders`)."""
    if os.path.lexists(folder / "assignments"):
        return [folder]
    if folder.name == "assignments" and _is_plain_dir(folder):
        return [folder.parent]
    found: list[Path] = []
    level, searched = [folder], 0
    for _ in range(SEARCH_DEPTH):
        level = [p for q in level for p in sorted(_subfolders(q))]
        level = level[:max(0, MAX_FOLDERS_SEARCHED - searched)]
        searched += len(level)
        hits = [p for p in level if os.path.lexists(p / "assignments")]
        found += hits
        level = [p for p in level if p not in hits]
    return found


def find_assignments(folder: Path) -> Path | None:
    """The folder holding assignments/ in an upload when there is exactly one
    (`assignments_candidates`), else None. Every front end (the CLI, batch
    grading, otter) finds a submission with this function."""
    found = assignments_candidates(folder)
    return found[0] if len(found) == 1 else None


def no_assignments_sentence(folder: Path, found: list[Path]) -> str:
    """What a student whose upload has no single assignments/ folder reads:
    what was expected, and when there are several, which (relative paths, at
    most MAX_NAMED; the names are the student's, so made one safe line each)."""
    if not found:
        return NO_ASSIGNMENTS
    shown = [one_line((p.relative_to(folder) / "assignments").as_posix(), 120) for p in found[:MAX_NAMED]]
    more = f" and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
    return (f"the upload holds {len(found)} assignments/ folders ({', '.join(shown)}{more}): upload one "
            f"starter kit's folder (or a zip of it) with a single assignments/ inside")


def _root_of(folder: Path) -> Path:
    found = assignments_candidates(folder)
    if len(found) != 1:
        raise NotASubmission(no_assignments_sentence(folder, found))
    return found[0]


def _check_zip(path: Path, members: list[zipfile.ZipInfo], into: Path) -> None:
    """Refuse a zip that is too big, writes outside `into` or holds anything
    but files and folders (the mode a Unix zip keeps in external_attr)."""
    if len(members) > MAX_ZIP_MEMBERS:
        raise SubmissionRefused(f"submission {path} holds more than {MAX_ZIP_MEMBERS} files")
    if sum(m.file_size for m in members) > MAX_UNPACKED_BYTES:
        raise SubmissionRefused(f"submission {path} unpacks to more than {MAX_UNPACKED_BYTES // 2**20} MiB")
    for m in members:
        target = (into / m.filename).resolve()
        if not target.is_relative_to(into.resolve()):
            raise SubmissionRefused(f"submission {path} has an unsafe path: {one_line(m.filename, 200)}")
        kind = stat.S_IFMT(m.external_attr >> 16)
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise refusal(m.filename.rstrip("/"), f"is {kind_of(kind)}")


# What a zip's own bytes can make the standard library raise while it is read and unpacked: a
# corrupt directory, header, name, CRC or deflate stream, a compression it does not know, a name
# that is no file name, an encrypted member (RuntimeError). The student's zip, so the student's 0
# (`UNREADABLE_ZIP`), never the grader's crash.
_ZIP_FAILURES = (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError, ValueError, UnicodeError,
                 RecursionError, OverflowError, KeyError, IndexError, struct.error, RuntimeError)
UNREADABLE_ZIP = ("the upload is a zip that cannot be read ({why}): zip the starter kit's folder again "
                  "and upload that")


def _unpack(path: Path, into: Path) -> None:
    """Unpack the zip at `path` into `into`, refusing it first (`_check_zip`). A zip that cannot be
    read is the student's bad upload (NotASubmission, one sentence); an OSError while writing
    (the grader's disk) is left to propagate."""
    try:
        with zipfile.ZipFile(path) as zf:
            _check_zip(path, zf.infolist(), into)
            zf.extractall(into)
    except ShardlabError:
        raise
    except _ZIP_FAILURES as exc:
        raise NotASubmission(UNREADABLE_ZIP.format(why=type(exc).__name__)) from None
    except OSError as exc:          # a name the file system refuses (too long, ...) is the zip's too
        if exc.errno in (errno.ENAMETOOLONG, errno.EINVAL, errno.EILSEQ, errno.EISDIR, errno.ENOTDIR,
                         errno.EEXIST):
            raise NotASubmission(UNREADABLE_ZIP.format(why=f"a member's name: {exc.strerror}")) from None
        raise


@contextmanager
def open_submission(path: str | Path) -> Iterator[Path]:
    """Yield the root of a staged copy (it holds assignments/ and the
    SUBMITTED_FILES present) of a folder or zip submission. Raises
    NotASubmission when it has no single assignments/ folder, ShardlabError
    when there is nothing at `path`, it is neither a folder nor a zip, or
    the zip or staging refuses it (a link, a path outside, too big)."""
    path = Path(path)
    if not path.exists():
        raise ShardlabError(f"no such file or folder: {path}")
    if not path.is_dir() and not zipfile.is_zipfile(path):
        raise ShardlabError(f"not a submission: {path} is neither a folder nor a zip file")
    with tempfile.TemporaryDirectory(prefix=leftovers.prefix("sub")) as tmp:
        if path.is_dir():
            found = _root_of(path)
        else:
            unpacked = Path(tmp) / "unpacked"
            unpacked.mkdir()
            _unpack(path, unpacked)
            found = _root_of(unpacked)
        yield stage(found, Path(tmp) / "staged", also=SUBMITTED_FILES)
