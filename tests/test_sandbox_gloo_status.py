"""Where each rank of a worker group is (`sandbox.gloo.ranks.status`): the slots the trusted ranks
write as they enter and leave collectives, and the grader reads only to explain a failure."""
import os
import struct
import time

import pytest

from shardlab.autograder.sandbox.gloo.ranks.status import SLOT, TEXT_BYTES, RankStatus, create_status, read_status

pytestmark = pytest.mark.pure


def test_each_rank_shows_where_it_is_and_what_it_entered_last(tmp_path):
    path = str(tmp_path / "status")
    create_status(path, 3)
    assert read_status(path, 3) == ([None] * 3, [None] * 3)
    ranks = [RankStatus(path, 3, r) for r in range(3)]
    ranks[0].enter("all_reduce #1 (12 bytes, forward)")
    ranks[1].enter("all_reduce #1 (12 bytes, forward)")
    ranks[1].enter(None)                     # left it
    ranks[1].enter("broadcast #2 (8 bytes, forward)")
    ranks[1].enter(None)
    assert read_status(path, 3) == (["all_reduce #1 (12 bytes, forward)", None, None],
                                    ["all_reduce #1 (12 bytes, forward)", "broadcast #2 (8 bytes, forward)", None])
    ranks[0].reset()                         # its next scenario: nothing entered yet
    assert read_status(path, 3)[0][0] is None and read_status(path, 3)[1][0] is None


def test_a_long_label_is_cut_on_a_character_boundary(tmp_path):
    path = str(tmp_path / "status")
    create_status(path, 1)
    label = "é" * TEXT_BYTES                 # two bytes a character: the cut falls inside one
    RankStatus(path, 1, 0).enter(label)
    now, _ = read_status(path, 1)
    assert now[0] == "é" * (TEXT_BYTES // 2)


def test_a_reader_never_sees_half_of_a_write(tmp_path):
    """A writer process (as a rank is) alternates two labels of different lengths as fast as it
    can; every read is one of the two whole (the seqlock), never a mix of them."""
    path = str(tmp_path / "status")
    create_status(path, 2)
    labels = ["a" * 200, "bb"]
    pid = os.fork()
    if pid == 0:                              # the writer: until the reader kills it
        try:
            rank, i = RankStatus(path, 2, 1), 0
            while True:
                rank.enter(labels[i % 2])
                i += 1
        finally:
            os._exit(0)
    try:
        deadline = time.monotonic() + 60      # the writer's first write: a loaded machine (load 30+)
        while read_status(path, 2)[0][1] is None and time.monotonic() < deadline:   # starts it late
            time.sleep(0.001)
        assert read_status(path, 2)[0][1] is not None, "the writer never wrote in 60 s"
        seen = {read_status(path, 2)[0][1] for _ in range(20000)}
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    # a blank read (None) is the reader giving up on a writer that never let a whole copy through in
    # GIVE_UP_SECONDS, as `_read_slot` says, which a writer at full speed can do on a loaded machine:
    # what must never be seen is a mix of the two labels
    assert seen - {None} <= set(labels), {s[:5] + "..." for s in seen - set(labels) if s}
    assert seen & set(labels), "no read got a whole label"


def test_a_slot_left_mid_write_reads_as_it_stands(tmp_path):
    """A rank killed between the two counts leaves its slot odd: the grader still reads it (after
    its tries), and the other ranks' slots are unaffected."""
    path = str(tmp_path / "status")
    create_status(path, 2)
    RankStatus(path, 2, 0).enter("barrier #3 (0 bytes, setup)")
    RankStatus(path, 2, 1).enter("all_gather #4 (64 bytes, forward)")
    with open(path, "r+b") as f:              # rank 1 died after making its count odd
        f.seek(SLOT)
        f.write(struct.pack("<q", 3))
    now, last = read_status(path, 2)
    assert now == ["barrier #3 (0 bytes, setup)", "all_gather #4 (64 bytes, forward)"]
    assert last == now


def test_a_missing_file_reads_as_nowhere(tmp_path):
    assert read_status(str(tmp_path / "gone"), 2) == ([None, None], [None, None])
    short = tmp_path / "short"
    short.write_bytes(b"")
    assert read_status(str(short), 2) == ([None, None], [None, None])
    assert not os.path.exists(tmp_path / "gone")
