"""Where each rank of a worker group is: the collective it is blocked in and the
last one it entered, on a file in the group's private folder (which only the
grader and the group's trusted processes can enter). Each trusted rank writes
its own slot as it enters and leaves a collective (`kit.tracing.Tracer`'s
status); the grader reads the slots only when it has to explain a failure or
a hang (`group.WorkerGroup`). No message per collective, then: a grading's
ranks enter about 2,300 collectives, and telling the grader of each, twice,
cost a JSON line, a send and a wake-up of the grader's thread every time.

Layout per rank, SLOT bytes: an int64 write count, then two texts (now, last),
each an int32 length and TEXT_BYTES of UTF-8. A writer makes the count odd,
writes, then makes it even again; a reader copies the slot between two equal
even counts (a seqlock; x86 keeps stores in order and loads in order, and the
grader runs on x86-64 Linux). A slot left odd by a rank that died mid-write
reads as it stands, after READ_SECONDS (`_read_slot`). No torch here: the grader creates the file
(`create_status`) before it asks for the ranks.
"""
from __future__ import annotations

import mmap
import os
import struct
import time

from shardlab.autograder.sandbox.gloo.ranks.board import create_zeroed, map_shared

TEXT_BYTES = 244                 # a label: "all_reduce to rank 3 #1234 (1,048,576 bytes, backward)" and room
_COUNT = struct.Struct("<q")
_TEXTS = struct.Struct(f"<i{TEXT_BYTES}si{TEXT_BYTES}s")       # now's length and bytes, last's
SLOT = _COUNT.size + _TEXTS.size
READ_SECONDS = 0.5               # a writer holds its slot odd for microseconds, unless it is preempted
SPINS = 100                      # copies tried before each further try sleeps
GIVE_UP_SECONDS = 5.0            # a writer that never lets a copy through (none does: a rank writes per collective)


def create_status(path: str, world_size: int) -> None:
    """The grader's side: the zeroed file (every rank before any collective), before any rank exists."""
    create_zeroed(path, world_size * SLOT)


def _text(label: str | None) -> bytes:
    data = (label or "").encode("utf-8")[:TEXT_BYTES]
    return data.decode("utf-8", "ignore").encode("utf-8")       # never half a character


class RankStatus:
    """One trusted rank's slot: `enter(label)` as it blocks, `enter(None)` as it unblocks (the
    tracer's status), `reset()` per run."""

    def __init__(self, path: str, world_size: int, rank: int):
        self.map = map_shared(path, world_size * SLOT)
        self.at, self.count = rank * SLOT, 0
        self.last = b""

    def _write(self, now: bytes, last: bytes) -> None:
        self.count += 1
        _COUNT.pack_into(self.map, self.at, self.count)             # odd: being written
        _TEXTS.pack_into(self.map, self.at + _COUNT.size, len(now), now, len(last), last)
        self.count += 1
        _COUNT.pack_into(self.map, self.at, self.count)             # even: whole

    def enter(self, label: str | None) -> None:
        """Blocked in `label` (None: in none); a label is also the last one entered."""
        now = _text(label)
        if now:
            self.last = now
        self._write(now, self.last)

    def reset(self) -> None:
        """A new scenario: in no collective, and none entered yet."""
        self.last = b""
        self._write(b"", b"")


def read_status(path: str, world_size: int) -> tuple[list[str | None], list[str | None]]:
    """The grader's side: ([the collective each rank is blocked in], [the last one each entered]),
    None where there is none (or the file is gone)."""
    now: list[str | None] = [None] * world_size
    last: list[str | None] = [None] * world_size
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return now, last
    try:
        board = mmap.mmap(fd, world_size * SLOT, prot=mmap.PROT_READ)
    except (OSError, ValueError):
        return now, last
    finally:
        os.close(fd)
    with board:
        for rank in range(world_size):
            slot = _read_slot(board, rank * SLOT)
            n_now, text_now, n_last, text_last = _TEXTS.unpack_from(slot, _COUNT.size)
            now[rank] = text_now[:max(0, min(n_now, TEXT_BYTES))].decode("utf-8", "replace") or None
            last[rank] = text_last[:max(0, min(n_last, TEXT_BYTES))].decode("utf-8", "replace") or None
    return now, last


def _read_slot(board: mmap.mmap, at: int) -> bytes:
    """The slot at `at`, copied between two equal even counts. A writer whose count stays odd and
    unchanged for READ_SECONDS died mid-write: its slot as it stands. One that keeps writing (its count
    moves) is waited for, up to GIVE_UP_SECONDS in all, then read as blank: never half of two writes."""
    start = time.monotonic()
    seen, still_since, attempt = None, start, 0
    while True:
        before = _COUNT.unpack_from(board, at)[0]
        slot = board[at:at + SLOT]
        after = _COUNT.unpack_from(board, at)[0]
        if before % 2 == 0 and after == before:
            return slot
        now = time.monotonic()
        if after != seen:
            seen, still_since = after, now
        elif after % 2 and now - still_since > READ_SECONDS:
            return slot
        if now - start > GIVE_UP_SECONDS:
            return bytes(SLOT)
        # SPINS yields, then sleeps, not yields: on a loaded machine the writer may be preempted on this very
        # core mid-write, and CFS's sched_yield barely gives it the CPU back (a reader spinning on it
        # read a torn slot after READ_SECONDS at load 5)
        if attempt > SPINS:
            time.sleep(0.0002)
        else:
            os.sched_yield()
        attempt += 1
