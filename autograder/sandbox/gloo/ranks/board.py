"""The fingerprint board of a worker group (`ranks.fingerprint`): a file in the
group's private folder, which only the grader and the group's trusted
processes can enter, that each trusted rank maps and posts the fingerprint
of each of its collectives on. No torch here: the grader creates the file
(`create_board`) before it asks for the ranks.

Layout, int64 throughout: per rank, GROUPS groups (a rank's own choice of
row per process group, found by the group's tag), per group two entries
(the rank's count n of collectives on the group so far, modulo 2), per
entry [tag, n + 1 (0: empty), fingerprint...]. Two entries suffice: a rank
posts collective n + 2 only after every rank of the group posted n + 1,
which each does only once it has read everyone's n. The fingerprint goes in
before the tag and the count, which are what a reader waits for (x86 keeps stores in
order; the grader runs on x86-64 Linux).
"""
from __future__ import annotations

import mmap
import os
import struct

import numpy as np

GROUPS = 8                 # process groups one rank checks collectives on (the default one, a mesh's axes)
FINGERPRINT = 10           # int64 fields of one fingerprint (`fingerprint.LENGTH`)
ENTRY = 2 + FINGERPRINT
_FINGERPRINT = f"<{FINGERPRINT}q"


def board_bytes(world_size: int) -> int:
    return world_size * GROUPS * 2 * ENTRY * 8


def create_zeroed(path: str, nbytes: int) -> None:
    """The grader's side of a file its group's trusted ranks share (this board, `ranks.status`):
    `nbytes` of zeros, made before any rank exists."""
    with open(path, "wb") as f:
        f.write(bytes(nbytes))


def map_shared(path: str, nbytes: int) -> mmap.mmap:
    """A trusted rank's writable, shared mapping of such a file."""
    fd = os.open(path, os.O_RDWR)
    try:
        return mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)


def create_board(path: str, world_size: int) -> None:
    """The grader's side: the zeroed file the ranks map, before any rank exists."""
    create_zeroed(path, board_bytes(world_size))


class Board:
    """One trusted rank's view of its group's board (module docstring)."""

    def __init__(self, path: str, world_size: int, rank: int):
        self.rank = rank
        self.map = map_shared(path, board_bytes(world_size))
        self.rows: dict[int, int] = {}          # tag -> this rank's row for that group
        self.found: dict[tuple[int, int], int] = {}   # (rank, tag) -> that rank's row: it never moves

    @staticmethod
    def _offset(rank: int, row: int, parity: int) -> int:
        return ((rank * GROUPS + row) * 2 + parity) * ENTRY * 8

    def post(self, tag: int, seq: int, fingerprint: list[int]) -> None:
        """This rank's fingerprint of its collective number `seq` (from 0) on the group `tag`."""
        if tag not in self.rows:
            if len(self.rows) == GROUPS:
                raise RuntimeError(f"collectives on more than {GROUPS} process groups")
            self.rows[tag] = len(self.rows)
        at = self._offset(self.rank, self.rows[tag], seq % 2)
        struct.pack_into(_FINGERPRINT, self.map, at + 16, *fingerprint)
        struct.pack_into("<q", self.map, at, tag)               # then what a reader waits for
        struct.pack_into("<q", self.map, at + 8, seq + 1)

    def _row(self, rank: int, tag: int) -> int | None:
        """`rank`'s row for the group `tag`, once it has posted on that group."""
        row = self.found.get((rank, tag))
        if row is None:
            for candidate in range(GROUPS):
                if any(struct.unpack_from("<q", self.map, self._offset(rank, candidate, p))[0] == tag
                       for p in (0, 1)):
                    row = self.found[(rank, tag)] = candidate
                    break
        return row

    def posted(self, ranks: tuple[int, ...], tag: int, seq: int) -> list[bool]:
        """Which of `ranks` have posted their collective number `seq` on the group `tag`: what a
        waiting rank polls, several times a collective (plain loads at known offsets, no arrays)."""
        out = []
        for rank in ranks:
            row = self._row(rank, tag)
            out.append(row is not None
                       and struct.unpack_from("<qq", self.map, self._offset(rank, row, seq % 2)) == (tag, seq + 1))
        return out

    def read(self, ranks: tuple[int, ...], tag: int, seq: int) -> tuple[np.ndarray, np.ndarray]:
        """(which of `ranks` have posted their collective number `seq` on the group `tag` (`posted`),
        their fingerprints: one row each, meaningful where posted)."""
        posted = self.posted(ranks, tag, seq)
        rows = []
        for rank, ok in zip(ranks, posted):
            row = self._row(rank, tag)
            # loaded after the count that says it is whole (x86 keeps loads in order)
            rows.append(struct.unpack_from(_FINGERPRINT, self.map, self._offset(rank, row, seq % 2) + 16)
                        if ok and row is not None else (0,) * FINGERPRINT)
        return np.array(posted, dtype=bool), np.array(rows, dtype=np.int64)
