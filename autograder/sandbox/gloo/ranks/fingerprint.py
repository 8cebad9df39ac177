"""Collective fingerprints, checked across the ranks by their trusted processes.

Gloo, given mismatched collectives (another op, another size), hangs, aborts
the process or returns garbage. torch's own check
(TORCH_DISTRIBUTED_DEBUG=DETAIL) wraps every process group: before each
collective a monitored barrier (rank 0 hears from every rank, then answers
each) and two all-gathers of the serialized fingerprint, on a helper group.
That is four exchanges for one collective of a few bytes: about 2 ms of CPU
per rank and collective on the grading machine, against 0.3 ms for the
collective itself, most of a grading's gloo CPU (docs/performance.md).

`FingerprintCheck` does the same check without a message: the trusted ranks
of a worker group share a file of its private folder (`ranks.board`); each
posts its fingerprint there and waits, polling with a backoff from 20 us to
1 ms, until every rank of the group posted the same op's, then compares
them. The tracer calls it inside each traced collective
(`kit.tracing.Tracer(check=...)`), so a rank that fails here fails in that
collective, as it did in torch's wrapper. Its failures read as torch's did:

- a rank that does not arrive within the collective timeout: torch's
  monitored-barrier texts ("[Rank 0]: Ranks 1 failed to pass monitoredBarrier
  in 3000 ms" on the group's first rank; "Rank r successfully reached
  monitoredBarrier, but received errors while waiting for send/recv from rank
  0. ..." on the others), which `kit.verdict` reads as a hang;
- different fingerprints: "Detected mismatch between collectives on ranks.
  Rank r is running collective: CollectiveFingerPrint(SequenceNumber=..., OpType=...,
  TensorShape=[...]), but Rank s is running collective: ...", naming the first
  rank (in group order) whose fingerprint differs, which `kit.tracing.explain`
  turns into one sentence.

A fingerprint is the op's type (torch's OpType names), its sequence number on
its group (every op on that group, point-to-point ones included, counted from
0 per rank, as torch numbers them) and the dtype and shape of each of its
tensors, compared as one 63-bit digest; the sequence number, the op and the
shape of its input are posted beside it for the message. As with torch's
check, a broadcast's source and a reduction's op are not part of it. The
board is the trusted processes' alone, as the group's FileStore beside it:
no student process can enter the folder.
"""
from __future__ import annotations

import hashlib
import time
from typing import Any

import torch
import torch.distributed.distributed_c10d as c10d

from shardlab.autograder.sandbox.gloo.ranks.board import FINGERPRINT, Board

OP_TYPES = {"all_reduce": "ALLREDUCE", "broadcast": "BROADCAST", "reduce": "REDUCE",
            "all_gather": "ALLGATHER", "all_gather_into_tensor": "_ALLGATHER_BASE",
            "_all_gather_base": "_ALLGATHER_BASE", "all_gather_single": "_ALLGATHER_BASE",
            "reduce_scatter": "REDUCE_SCATTER", "reduce_scatter_tensor": "_REDUCE_SCATTER_BASE",
            "_reduce_scatter_base": "_REDUCE_SCATTER_BASE", "reduce_scatter_single": "_REDUCE_SCATTER_BASE",
            "barrier": "BARRIER", "gather": "GATHER", "scatter": "SCATTER",
            "all_to_all": "ALLTOALL", "all_to_all_single": "ALLTOALL_BASE"}
OP_NAMES = sorted(set(OP_TYPES.values()))
# the argument whose shape the message shows (torch's fingerprint shows its input's)
INPUTS = {"all_gather_into_tensor": "input_tensor", "_all_gather_base": "input_tensor",
          "all_gather_single": "input_tensor", "reduce_scatter": "input_list", "reduce_scatter_tensor": "input",
          "_reduce_scatter_base": "input", "reduce_scatter_single": "input", "all_to_all": "input_tensor_list",
          "all_to_all_single": "input"}
# one fingerprint as int64: digest, sequence number, op index, input ndim, its first SHOWN_DIMS sizes
LENGTH = FINGERPRINT
SHOWN_DIMS = LENGTH - 4          # dimensions of the input shape posted for the message
POLL_SECONDS = (20e-6, 1e-3)     # the first and the longest sleep between two looks at the board


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, torch.Tensor)]
    return []


def fingerprint(op: str, seq: int, bound: dict) -> list[int]:
    """The fingerprint of op `op` (a `tracing.TRACED_OPS` name, not point-to-point) called with the
    arguments `bound` (by name) as the `seq`-th op of its group (module docstring)."""
    described = [f"{t.dtype}{list(t.shape)}" for v in bound.values() for t in _tensors(v)]
    text = f"{OP_TYPES[op]}|{seq}|{';'.join(described)}"
    digest = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little") >> 1
    shown = _tensors(bound.get(INPUTS.get(op, "tensor")))
    shape = list(shown[0].shape) if shown else []
    dims = (shape + [0] * SHOWN_DIMS)[:SHOWN_DIMS]
    return [digest, seq, OP_NAMES.index(OP_TYPES[op]), len(shape), *dims]


def _described(row: Any) -> str:
    """A fingerprint as torch's message shows one (the part `tracing.explain` reads)."""
    seq, op, ndim = int(row[1]), int(row[2]), int(row[3])
    name = OP_NAMES[op] if 0 <= op < len(OP_NAMES) else "UNKNOWN"
    dims = [str(int(d)) for d in row[4:4 + min(max(ndim, 0), SHOWN_DIMS)]]
    return f"CollectiveFingerPrint(SequenceNumber={seq}, OpType={name}, TensorShape=[{', '.join(dims)}])"


def mismatch(table: Any, me: int) -> str | None:
    """torch's message for the first rank (group rank, in order) whose fingerprint differs from rank
    `me`'s in `table` (one row per rank of the group), or None when all agree."""
    digests = [int(row[0]) for row in table]
    for other, digest in enumerate(digests):
        if digest != digests[me]:
            return (f"Detected mismatch between collectives on ranks. Rank {me} is running collective: "
                    f"{_described(table[me])}, but Rank {other} is running collective: "
                    f"{_described(table[other])}.")
    return None


class FingerprintCheck:
    """`tracing.Tracer`'s check in a trusted rank: `board` is its worker group's (`ranks.board`),
    `timeout_seconds` the collective timeout (module docstring)."""

    def __init__(self, board: Board, timeout_seconds: float, world_size: int):
        self.board, self.world_size = board, world_size
        self.timeout_seconds = timeout_seconds
        self.sequence: dict[tuple[int, ...], int] = {}       # a group's ranks -> its ops so far
        self.checked: dict[tuple[int, ...], int] = {}        # a group's ranks -> its collectives so far
        self._ranks: dict[int, tuple[int, ...]] = {}          # id(group) -> its ranks (global)

    def ranks(self, group: Any) -> tuple[int, ...]:
        if group is None or group is c10d.GroupMember.WORLD:
            return tuple(range(self.world_size))
        if id(group) not in self._ranks:
            self._ranks[id(group)] = tuple(c10d.get_process_group_ranks(group))
        return self._ranks[id(group)]

    def __call__(self, op: str, bound: dict) -> None:
        """Count op `op` on its group; for a collective, check its fingerprint against every rank's
        of the group (RuntimeError with torch's words when one differs or a rank does not arrive)."""
        ranks = self.ranks(bound.get("group"))
        seq = self.sequence.get(ranks, 0)
        self.sequence[ranks] = seq + 1
        if op not in OP_TYPES or len(ranks) < 2:
            return
        # the ranks meet at their n-th collective on the group, as at torch's n-th monitored barrier:
        # a rank that ran more ops before it (a send) meets the others there, with another sequence number
        n = self.checked.get(ranks, 0)
        self.checked[ranks] = n + 1
        me = ranks.index(self.board.rank)
        tag = sum(1 << r for r in ranks)          # the group, by its ranks
        self.board.post(tag, n, fingerprint(op, seq, bound))
        deadline = time.monotonic() + self.timeout_seconds
        pause = POLL_SECONDS[0]
        while True:
            posted = self.board.posted(ranks, tag, n)
            if all(posted):
                break
            if time.monotonic() > deadline:
                raise self.timed_out(me, [i for i, ok in enumerate(posted) if not ok])
            time.sleep(pause)
            pause = min(2 * pause, POLL_SECONDS[1])
        found = mismatch(self.board.read(ranks, tag, n)[1], me)
        if found:
            raise RuntimeError(found)

    def timed_out(self, me: int, late: list[int]) -> RuntimeError:
        """torch's monitored barrier's words for ranks that never posted (module docstring): on the
        group's first rank, which they are; on the others, that the first never answered."""
        millis = int(self.timeout_seconds * 1000)
        if me == 0:
            return RuntimeError(f"[Rank 0]: Ranks {', '.join(map(str, late))} failed to pass monitoredBarrier "
                                f"in {millis} ms")
        return RuntimeError(f"Rank {me} successfully reached monitoredBarrier, but received errors while "
                            f"waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.\n"
                            f" Original exception: \nTimed out waiting {millis}ms for ranks "
                            f"{', '.join(map(str, late))} of the group")
