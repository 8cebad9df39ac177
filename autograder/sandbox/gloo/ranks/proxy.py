"""torch.distributed as the student's process sees it: every collective is
carried out by the rank's trusted process (`ranks.trusted`).

The student's process has no gloo connection and no network. `Proxy.install()`
replaces the public collectives of `torch.distributed` (both namespaces
student code may use) with functions that send the input tensor to the
trusted process, which performs the real gloo collective with the other
ranks, records it, and sends the result back. Semantics follow torch's:

- in-place results (`all_reduce`, `broadcast`) and output tensors
  (`all_gather_into_tensor`, `reduce_scatter_tensor`, list forms) are
  written when the call returns, or, with `async_op=True`, when the returned
  work's `wait()` returns, never before, however soon the reply arrives (the
  input is read when the call is made): a result is never raced for, and a
  handle never waited for leaves its tensor as it was, in every grading;
  `is_completed()` waits too;
- point-to-point ops (`send`, `recv`, `isend`, `irecv`, `P2POp` with
  `batch_isend_irecv`) name their peer (no receive from any source) and a
  tag from 0 to 7; the trusted process starts them at once and waits for
  them when the student's process waits (`ranks.p2p`), so a
  blocking `send` waits for its matching recv as with gloo itself. A recv's
  data is written into its tensor when its wait returns; `is_completed()` of
  a point-to-point op waits for it (a poll would spin until the deadline);
- only the default group exists (`group=None`), of `world_size` ranks, plus
  the groups a scenario made in its trusted half (a mesh's axes), which
  the student half hands student code as `NamedGroup`s: a collective on
  one names it, and the trusted process runs it on the real group;
- `init_process_group` is a no-op (the group is already up);
  `get_rank`/`get_world_size` answer for this rank.

A reader thread files the replies as they arrive, so the trusted process
never blocks on a student that issued many async collectives before
waiting. Nothing here is trusted by the grader: what counts is what the
trusted process saw and did.
"""
from __future__ import annotations

import functools
import threading
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

from shardlab.autograder.sandbox.gloo.ranks.channel import Channel, describe, tensor_bytes, tensor_from

GATHER_INTO = ("all_gather_into_tensor", "all_gather_single", "_all_gather_base")
SCATTER_FROM = ("reduce_scatter_tensor", "reduce_scatter_single", "_reduce_scatter_base")
REDUCE_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR")


def _reduce_name(op: Any) -> str:
    for name in REDUCE_OPS:
        if hasattr(dist.ReduceOp, name) and op == getattr(dist.ReduceOp, name):
            return name
    raise ValueError(f"unsupported reduce op {op!r}")


def _check_group(group: Any) -> None:
    if group is not None and group is not getattr(dist.group, "WORLD", None):
        raise ValueError("only the default process group exists here (pass group=None)")


class NamedGroup:
    """A process group of the run (`RankContext.groups`) as the student's process holds it: its name
    (what the trusted process is asked to use) and its ranks. Answers `size()` and `rank()` as a
    torch ProcessGroup does."""

    def __init__(self, name: str, ranks: list[int], rank: int):
        self.name, self.ranks, self._rank = name, list(ranks), rank

    def size(self) -> int:
        return len(self.ranks)

    def rank(self) -> int:
        return self.ranks.index(self._rank) if self._rank in self.ranks else -1

    def __repr__(self) -> str:
        return f"<process group {self.name!r} of ranks {self.ranks}>"


def _group_field(group: Any) -> dict:
    """The request's "group" field: none for the default group, the name of a `NamedGroup`."""
    if isinstance(group, NamedGroup):
        return {"group": group.name}
    _check_group(group)
    return {}


class Work:
    """What an async collective returns; `wait()` writes the result."""

    def __init__(self, proxy: "Proxy", call_id: int, write):
        self._proxy, self._id, self._write, self._done = proxy, call_id, write, False

    def wait(self, timeout=None) -> bool:
        if not self._done:
            self._write(self._proxy._result(self._id))
            self._done = True
        return True

    def is_completed(self) -> bool:
        """Waits for the collective and writes its result: answering from whether its reply had
        arrived yet would let the student's code race (a result polled complete but never waited
        for, so never written), a race that a grading must settle the same way every time."""
        return self.wait()

    def is_success(self) -> bool:
        return self.is_completed()


class P2PWork(Work):
    """What isend/irecv return: `wait()` asks the trusted process to wait for the op."""

    def wait(self, timeout=None) -> bool:
        if not self._done:
            self._proxy.channel.send({"wait": self._id})
        return super().wait(timeout)

    def is_completed(self) -> bool:
        return self.wait()


class P2POp:
    """torch.distributed.P2POp for `batch_isend_irecv` (the default group only)."""

    def __init__(self, op, tensor, peer=None, group=None, tag=0, group_peer=None):
        _check_group(group)
        if getattr(op, "__name__", None) not in ("isend", "irecv"):
            raise ValueError("Invalid ``op``. Expected ``op`` to be of type ``torch.distributed.isend`` or "
                             "``torch.distributed.irecv``.")
        self.op, self.tensor, self.tag = op, tensor, tag
        self.peer = self.group_peer = peer if peer is not None else group_peer
        self.group = None


class Proxy:
    def __init__(self, channel: Channel, rank: int, world_size: int):
        self.channel, self.rank, self.world_size = channel, rank, world_size
        self._next_id = 0
        self._replies: dict[int, tuple[dict, bytearray]] = {}
        self._runs: list[tuple[dict, bytearray]] = []
        self._closed = False
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True, name="collective replies")
        self._reader.start()

    def named_groups(self, groups: dict) -> dict[str, NamedGroup]:
        """The run's process groups ({name: ranks}, from the trusted process) as student code holds them."""
        return {str(name): NamedGroup(str(name), list(ranks), self.rank) for name, ranks in groups.items()}

    # ---- the trusted process's messages ----------------------------------------------
    def _read(self) -> None:
        try:
            while (frame := self.channel.receive()) is not None:
                header, _ = frame
                with self._cond:
                    if "run" in header:
                        self._runs.append(frame)
                    else:
                        self._replies[int(header.get("id", -1))] = frame
                    self._cond.notify_all()
        except Exception:  # noqa: BLE001 - the trusted side went away
            pass
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def next_run(self) -> tuple[dict, bytearray] | None:
        with self._cond:
            self._cond.wait_for(lambda: self._runs or self._closed)
            return self._runs.pop(0) if self._runs else None

    def _result(self, call_id: int) -> torch.Tensor | None:
        with self._cond:
            self._cond.wait_for(lambda: call_id in self._replies or self._closed)
            if call_id not in self._replies:
                raise RuntimeError("the rank's communication process is gone")
            header, payload = self._replies.pop(call_id)
        if "failed" in header:
            raise RuntimeError(str(header["failed"]))
        return tensor_from(header, payload) if "dtype" in header else None

    # ---- sending -------------------------------------------------------------------
    def mark(self, kind: str, **fields) -> None:
        """Tell the trusted process where the scenario is (phases, gradients, units)."""
        self.channel.send({"mark": kind, **fields})

    def _issue(self, op: str, tensor: torch.Tensor | None, write, async_op: bool, **extra):
        if tensor is not None and not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{op} expects a tensor, got {type(tensor).__name__}")
        self._next_id += 1
        call_id = self._next_id
        header = {"op": op, "id": call_id, "async": bool(async_op), **extra}
        if tensor is not None:
            header.update(describe(tensor))
        self.channel.send(header, tensor_bytes(tensor) if tensor is not None else b"")
        work = Work(self, call_id, write)
        if async_op:
            return work
        work.wait()
        return None

    # ---- torch.distributed's collectives ----------------------------------------------
    def all_reduce(self, tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
        return self._issue("all_reduce", tensor, lambda r: _copy(tensor, r), async_op, reduce=_reduce_name(op),
                           **_group_field(group))

    def broadcast(self, tensor, src=None, group=None, async_op=False, group_src=None):
        src = src if src is not None else group_src
        return self._issue("broadcast", tensor, lambda r: _copy(tensor, r), async_op, src=int(src),
                           **_group_field(group))

    def all_gather_into_tensor(self, output_tensor, input_tensor, group=None, async_op=False,
                               _name="all_gather_into_tensor"):
        return self._issue(_name, input_tensor, lambda r: _copy(output_tensor, r),
                           async_op, out_shape=list(output_tensor.shape), **_group_field(group))

    def all_gather(self, tensor_list, tensor, group=None, async_op=False):
        return self._issue("all_gather", tensor, lambda r: _split_into(tensor_list, r), async_op,
                           **_group_field(group))

    def reduce_scatter_tensor(self, output, input, op=dist.ReduceOp.SUM, group=None, async_op=False,
                              _name="reduce_scatter_tensor"):
        return self._issue(_name, input, lambda r: _copy(output, r), async_op,
                           reduce=_reduce_name(op), out_shape=list(output.shape), **_group_field(group))

    def reduce_scatter(self, output, input_list, op=dist.ReduceOp.SUM, group=None, async_op=False):
        extra = _group_field(group)
        whole = torch.cat([t.reshape(-1) for t in input_list])
        return self._issue("reduce_scatter", whole, lambda r: _copy(output, r), async_op,
                           reduce=_reduce_name(op), out_shape=list(output.shape), **extra)

    def barrier(self, group=None, async_op=False, device_ids=None):
        return self._issue("barrier", None, lambda r: None, async_op, **_group_field(group))

    # ---- point to point ---------------------------------------------------------------
    def _p2p(self, op: str, tensor, peer, group, tag, write) -> P2PWork:
        _check_group(group)
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{op} expects a tensor, got {type(tensor).__name__}")
        if peer is None:
            raise ValueError(f"{op} needs the peer's rank (receiving from any source is not supported here)")
        if not isinstance(peer, int) or not 0 <= peer < self.world_size:
            raise ValueError(f"Invalid rank {peer!r}: ranks are 0 to {self.world_size - 1}")
        if peer == self.rank:
            raise ValueError("Invalid peer rank: should not be the same as the rank of the current process.")
        if not isinstance(tag, int) or not 0 <= tag <= 7:
            raise ValueError(f"tag {tag!r}: this assignment's process group takes tags 0 to 7")
        self._next_id += 1
        header = {"op": op, "id": self._next_id, "peer": int(peer), "tag": int(tag), "async": True}
        if op == "isend":
            header.update(describe(tensor))
            self.channel.send(header, tensor_bytes(tensor))
        else:
            self.channel.send({**header, "recv": describe(tensor)})
        return P2PWork(self, self._next_id, write)

    def isend(self, tensor, dst=None, group=None, tag=0, group_dst=None):
        return self._p2p("isend", tensor, dst if dst is not None else group_dst, group, tag, lambda r: None)

    def irecv(self, tensor, src=None, group=None, tag=0, group_src=None):
        return self._p2p("irecv", tensor, src if src is not None else group_src, group, tag,
                         lambda r: _copy(tensor, r))

    def send(self, tensor, dst=None, group=None, tag=0, group_dst=None) -> None:
        self.isend(tensor, dst, group, tag, group_dst).wait()

    def recv(self, tensor, src=None, group=None, tag=0, group_src=None) -> int:
        src = src if src is not None else group_src
        self.irecv(tensor, src, group, tag).wait()
        return src

    def batch_isend_irecv(self, p2p_op_list) -> list[P2PWork]:
        if not p2p_op_list or not all(isinstance(p, P2POp) for p in p2p_op_list):
            raise ValueError("Invalid ``p2p_op_list``: a non-empty list of P2POp instances")
        return [(self.isend if p.op.__name__ == "isend" else self.irecv)(p.tensor, p.peer, None, p.tag)
                for p in p2p_op_list]

    def _unsupported(self, name: str):
        def refuse(*args, **kwargs):
            raise RuntimeError(f"torch.distributed.{name} is not available in this assignment's process "
                               f"group (use all_reduce, broadcast, all_gather, all_gather_into_tensor, "
                               f"reduce_scatter, reduce_scatter_tensor, barrier, send, recv, isend, irecv, "
                               f"batch_isend_irecv)")
        return refuse

    def install(self) -> None:
        """Replace torch.distributed's collectives and queries in both namespaces."""
        ws, rank = self.world_size, self.rank
        table = {
            "all_reduce": self.all_reduce, "broadcast": self.broadcast,
            "all_gather": self.all_gather, "reduce_scatter": self.reduce_scatter,
            "barrier": self.barrier,
            "send": self.send, "recv": self.recv, "isend": self.isend, "irecv": self.irecv,
            "batch_isend_irecv": self.batch_isend_irecv, "P2POp": P2POp,
            "get_rank": lambda group=None: group.rank() if isinstance(group, NamedGroup) else rank,
            "get_world_size": lambda group=None: group.size() if isinstance(group, NamedGroup) else ws,
            "is_initialized": lambda: True, "is_available": lambda: True,
            "get_backend": lambda group=None: "gloo",
            "init_process_group": lambda *a, **k: None, "destroy_process_group": lambda *a, **k: None,
            "get_process_group_ranks": lambda group=None: (list(group.ranks) if isinstance(group, NamedGroup)
                                                           else list(range(ws))),
        }
        # the flat forms keep the name the student called: the trace shows it
        for name in GATHER_INTO:
            table[name] = functools.partial(self.all_gather_into_tensor, _name=name)
        for name in SCATTER_FROM:
            table[name] = functools.partial(self.reduce_scatter_tensor, _name=name)
        for name in ("all_to_all", "all_to_all_single", "gather", "scatter", "reduce", "new_group",
                     "all_gather_object", "broadcast_object_list", "monitored_barrier"):
            table[name] = self._unsupported(name)
        for namespace in (dist, c10d):
            for name, fn in table.items():
                setattr(namespace, name, fn)


@torch.no_grad()
def _copy(target: torch.Tensor, result: torch.Tensor) -> None:
    if result.numel() != target.numel():
        raise RuntimeError(f"the collective returned {result.numel()} elements for a tensor of {target.numel()}")
    target.copy_(result.reshape(target.shape))


@torch.no_grad()
def _split_into(targets: list[torch.Tensor], result: torch.Tensor) -> None:
    flat, offset = result.reshape(-1), 0
    for t in targets:
        t.copy_(flat[offset:offset + t.numel()].reshape(t.shape))
        offset += t.numel()
