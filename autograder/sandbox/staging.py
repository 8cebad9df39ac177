"""Copy a submission's `assignments/` without ever following a link.

The grader copies the submission before any student code runs, as a user
who can read what the student cannot (root, on a grading server). A copy
that followed links would carry whatever they point at into the sandbox: a
root-only file, the grader's cache, the repo's `solutions/`. A hard link is
the same attack without a link to see, and a FIFO would stall the copy.

So staging accepts plain files and folders only, at any depth, and refuses
anything else with one line naming the path: symlinks (`assignments` itself
too), regular files with other names (st_nlink > 1), devices, FIFOs,
sockets. The check and the copy are one step, made on file descriptors:
every name is opened relative to its folder's descriptor with O_NOFOLLOW,
and the opened file's own fstat decides, so a file swapped for a link after
it was looked at fails instead of being followed. Sizes are capped (bytes,
files, depth); `__pycache__` is skipped. The copy is world-readable (dirs
0755, files 0644) so the unprivileged sandbox user can read it: the jail
makes it visible only inside its own sandbox.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from shardlab.autograder.core.errors import ShardlabError, SubmissionRefused
from shardlab.autograder.sandbox.untrusted import one_line

MAX_BYTES = 50 * 2**20      # what a submission may unpack to (`engine.submission` uses it too)
MAX_FILES = 1000
MAX_DEPTH = 8               # folders below assignments/
SKIPPED = frozenset({"__pycache__"})
_CHUNK = 1 << 16

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the check opens at once instead of stalling
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def refusal(path: str, why: str) -> SubmissionRefused:
    """The one-line error for a path of the submission that cannot be staged."""
    return SubmissionRefused(f"submission refused: {one_line(path, 200)} {why} "
                         "(only plain files and folders are accepted)")


def kind_of(mode: int) -> str:
    """What a file of this st_mode is, in words (for a refusal)."""
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISREG, "a file, not a folder")):
        if test(mode):
            return name
    return "not a plain file or folder"


def _lstat(name: str, dir_fd: int) -> os.stat_result:
    """The entry itself, never what a link points at."""
    return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)


class _Budget:
    def __init__(self):
        self.files, self.bytes = 0, 0

    def add_file(self) -> None:
        self.files += 1
        if self.files > MAX_FILES:
            raise SubmissionRefused(f"submission refused: assignments/ holds more than {MAX_FILES} files")

    def add_bytes(self, n: int) -> None:
        self.bytes += n
        if self.bytes > MAX_BYTES:
            raise SubmissionRefused(f"submission refused: assignments/ holds more than {MAX_BYTES // 2**20} MiB")


def _open(name: str, dir_fd: int, flags: int, shown: str) -> int:
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise refusal(shown, "is a symbolic link") from None
        if exc.errno == errno.ENOTDIR:
            raise refusal(shown, "is not a folder") from None
        raise refusal(shown, f"could not be read ({exc.strerror})") from None


def _opened_as_checked(fd: int, checked: os.stat_result, shown: str, want_dir: bool) -> None:
    """The opened file is the one looked at, and of the right kind."""
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino):
        raise refusal(shown, "changed while it was being staged")
    if want_dir and not stat.S_ISDIR(st.st_mode) or not want_dir and not stat.S_ISREG(st.st_mode):
        raise refusal(shown, f"is {kind_of(st.st_mode)}")
    if not want_dir and st.st_nlink > 1:
        raise refusal(shown, "is a hard link to another file")


def _copy_file(name: str, checked: os.stat_result, src_dir: int, dst_dir: int, shown: str,
               budget: _Budget) -> None:
    """Copy one file that `checked` (its lstat) says is plain: opened without
    following links, and refused unless the opened file is the one checked."""
    if not stat.S_ISREG(checked.st_mode):
        raise refusal(shown, f"is {kind_of(checked.st_mode)}")
    if checked.st_nlink > 1:
        raise refusal(shown, "is a hard link to another file")
    budget.add_file()
    src = _open(name, src_dir, _FILE_FLAGS, shown)
    try:
        _opened_as_checked(src, checked, shown, want_dir=False)
        dst = os.open(name, _NEW_FILE_FLAGS, 0o600, dir_fd=dst_dir)
        try:
            while chunk := os.read(src, _CHUNK):
                budget.add_bytes(len(chunk))
                os.write(dst, chunk)
            os.fchmod(dst, 0o644)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _copy_dir(src: int, dst: int, shown: str, depth: int, budget: _Budget) -> None:
    """Copy the folder open as `src` into the (new, empty) folder open as `dst`."""
    for name in sorted(os.listdir(src)):
        if name in SKIPPED:
            continue
        path = f"{shown}/{name}"
        checked = _lstat(name, src)
        if not stat.S_ISDIR(checked.st_mode):
            _copy_file(name, checked, src, dst, path, budget)
            continue
        if depth >= MAX_DEPTH:
            raise refusal(path, f"is nested deeper than {MAX_DEPTH} folders")
        sub = _open(name, src, _DIR_FLAGS, path)
        try:
            _opened_as_checked(sub, checked, path, want_dir=True)
            os.mkdir(name, 0o700, dir_fd=dst)
            sub_dst = os.open(name, _DIR_FLAGS, dir_fd=dst)
            try:
                _copy_dir(sub, sub_dst, path, depth + 1, budget)
                os.fchmod(sub_dst, 0o755)
            finally:
                os.close(sub_dst)
        finally:
            os.close(sub)


def stage(root: str | Path, into: Path, also: tuple[str, ...] = ()) -> Path:
    """Copy `root`/assignments/ (and the top-level files named in `also`,
    when present) into `into`, refusing anything but plain files and folders
    (SubmissionRefused). `into` is created if needed and made 0755; returns it.
    `root` itself is the grader's choice (an unpacked zip, or a folder given
    on the command line) and may be reached through links."""
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    into.chmod(0o755)
    budget = _Budget()
    src_root = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    dst_root = os.open(into, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        try:
            checked = _lstat("assignments", src_root)
        except FileNotFoundError:
            raise ShardlabError(f"not a submission: {one_line(str(root), 200)} holds no assignments/ folder") \
                from None
        if not stat.S_ISDIR(checked.st_mode):
            raise refusal("assignments", f"is {kind_of(checked.st_mode)}")
        src = _open("assignments", src_root, _DIR_FLAGS, "assignments")
        try:
            _opened_as_checked(src, checked, "assignments", want_dir=True)
            os.mkdir("assignments", 0o700, dir_fd=dst_root)
            dst = os.open("assignments", _DIR_FLAGS, dir_fd=dst_root)
            try:
                _copy_dir(src, dst, "assignments", 0, budget)
                os.fchmod(dst, 0o755)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        for name in also:
            try:
                checked = _lstat(name, src_root)
            except FileNotFoundError:
                continue
            _copy_file(name, checked, src_root, dst_root, name, budget)
    finally:
        os.close(src_root)
        os.close(dst_root)
    return into
