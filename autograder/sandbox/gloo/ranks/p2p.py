"""Point-to-point operations (send, recv and their async forms), trusted side.

The student's process asks for them like any collective
(`ranks.proxy`): {"op": "isend" | "irecv", "id",
"peer", "tag"} with the tensor to send, or the dtype and shape of the buffer
to receive into ("recv"). This process starts the real gloo `isend`/`irecv`
through the traced functions (`kit.tracing`: each
op recorded with its peer, bytes, phase and times) and does not answer yet:
the student's process answers for itself when it waits ({"wait": id}), and
only then does this process wait for the op (its status naming the op and
the peer, for a hang) and send back nothing (a send) or the received tensor.
So what blocks in the student's process is what blocks with torch: a send
waits for its matching recv (gloo's sends are rendezvous), an isend does not.

Gloo matches a recv with the next send of the same peer and tag and aborts
the whole process when the sizes differ, so the tag gloo sees carries the
message's byte count: `(bytes << 3) | tag`, the student's tag being 0-7. A
send and a recv of different sizes then never match and both time out after
the group's collective timeout (GlooLimits), like any other mismatched
order, and the rank's error names the op, this rank's peer and the size.

Every op the student's process did not wait for is waited for before the
scenario reports (`drain`): a send nobody received fails the run instead of
lingering into the next scenario of the worker group.

A request is checked against `P2P_REQUEST` (the types and sizes of its
fields: `schema.Malformed`) before anything reads it, then for what it asks
(a peer of the group, a tag 0-7, a fresh id, a size under the cap:
P2PRequestError); a wait's id must name an outstanding op (`wait`).
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from shardlab.autograder.sandbox.gloo.ranks.channel import DTYPES, TENSOR_FIELDS, ProtocolError, tensor_from
from shardlab.autograder.kit.schema import Bool, Fields, Int, Malformed, Text, check, shape_of
from shardlab.autograder.kit.verdict import PAIRING_ADVICE

P2P_REQUESTS = ("isend", "irecv")
# an isend carries its tensor's dtype and shape, an irecv its buffer's ("recv"); which one a
# request needs, and the values of peer, tag and id, are `PointToPoint.issue`'s to check
P2P_REQUEST = Fields({"op": Text(choices=P2P_REQUESTS), "id": Int(), "peer": Int(), "tag": Int(),
                      "async": Bool()}, {**TENSOR_FIELDS, "recv": Fields(TENSOR_FIELDS)})
MAX_TAG = 7
MAX_MESSAGE_BYTES = (1 << 28) - 1         # the channel's payload cap; also keeps the encoded tag an int32
MAX_PENDING = 4096                        # unwaited ops of one run
MAX_PENDING_BYTES = 1 << 29               # their buffers


class P2PRequestError(Exception):
    """The student's process asked for a point-to-point op that cannot be."""


class P2PFailed(Exception):
    """A point-to-point op failed on the wire (a timeout: no matching op on the peer)."""


def _buffer(meta) -> torch.Tensor:
    """The receive buffer {"dtype", "shape"} the student's process described."""
    if not isinstance(meta, dict):
        raise P2PRequestError("a recv without the shape and dtype of its buffer")
    dtype = DTYPES.get(meta.get("dtype"))
    try:
        shape = shape_of(meta.get("shape"))
    except Malformed as exc:
        raise P2PRequestError(f"not a receive buffer: {exc}") from None
    if dtype is None:
        raise P2PRequestError(f"not a receive buffer: {str(meta)[:200]}")
    numel = 1
    for s in shape:
        numel *= s
    if numel * torch.empty((), dtype=dtype).element_size() > MAX_MESSAGE_BYTES:
        raise P2PRequestError(f"a message of {numel} elements is over the cap")
    return torch.empty(shape, dtype=dtype)


class PointToPoint:
    """One run's outstanding point-to-point ops on one rank."""

    def __init__(self, rank: int, world_size: int, phase=lambda: ""):
        self.rank, self.world_size, self.phase = rank, world_size, phase
        self.pending: dict[int, tuple] = {}     # id -> (work, its tensor, description)
        self.pending_bytes = 0

    def issue(self, header: dict, payload: bytearray) -> None:
        """Start the op; its answer waits for the student's wait. Malformed: the
        request does not fit `P2P_REQUEST`."""
        check(header, P2P_REQUEST, "point-to-point request")
        op, call_id, peer, tag = header.get("op"), header.get("id"), header.get("peer"), header.get("tag", 0)
        if not isinstance(call_id, int) or call_id in self.pending:
            raise P2PRequestError("a point-to-point op without a fresh id")
        if not isinstance(peer, int) or isinstance(peer, bool) or not 0 <= peer < self.world_size:
            raise P2PRequestError(f"{op} with rank {str(peer)[:20]}: ranks are 0 to {self.world_size - 1}")
        if peer == self.rank:
            raise P2PRequestError(f"{op} with rank {peer}, which is this rank itself")
        if not isinstance(tag, int) or isinstance(tag, bool) or not 0 <= tag <= MAX_TAG:
            raise P2PRequestError(f"tag {str(tag)[:20]}: this process group takes tags 0 to {MAX_TAG}")
        if len(self.pending) >= MAX_PENDING:
            raise P2PRequestError(f"more than {MAX_PENDING} point-to-point ops issued and not waited for")
        try:
            t = tensor_from(header, payload) if op == "isend" else _buffer(header.get("recv"))
        except ProtocolError as exc:
            raise P2PRequestError(str(exc)) from None
        nbytes = t.numel() * t.element_size()
        if nbytes > MAX_MESSAGE_BYTES or self.pending_bytes + nbytes > MAX_PENDING_BYTES:
            raise P2PRequestError("point-to-point messages over the size cap")
        wire_tag = (nbytes << 3) | tag
        what = dict(send=op == "isend", peer=peer, bytes=nbytes, tag=tag, phase=self.phase())
        try:
            if op == "isend":
                work = dist.isend(t, dst=peer, tag=wire_tag)
            else:
                work = dist.irecv(t, src=peer, tag=wire_tag)
        except Exception as exc:  # noqa: BLE001 - gloo refused to start it (a peer gone)
            raise P2PFailed(self.explain(what, exc)) from None
        self.pending[call_id] = (work, t, what)        # the tensor lives until the op is waited for
        self.pending_bytes += nbytes

    def wait(self, call_id) -> torch.Tensor | None:
        """Wait for the op `call_id`: None for a send, the received tensor for a recv."""
        if not isinstance(call_id, int) or call_id not in self.pending:
            raise P2PRequestError("a wait for no outstanding point-to-point op")
        work, tensor, what = self.pending.pop(call_id)
        self.pending_bytes -= what["bytes"]
        try:
            work.wait()
        except Exception as exc:  # noqa: BLE001 - gloo's timeout, or a peer that went away
            raise P2PFailed(self.explain(what, exc)) from None
        return None if what["send"] else tensor

    def drain(self) -> None:
        """Wait for every op not waited for (each within the group's timeout)."""
        for call_id in sorted(self.pending):
            work, _, what = self.pending.pop(call_id)
            try:
                work.wait()
            except Exception as exc:  # noqa: BLE001
                raise P2PFailed(self.explain(what, exc, waited=False)) from None
        self.pending_bytes = 0

    def explain(self, what: dict, exc: BaseException, waited: bool = True) -> str:
        """One line naming this rank's op, its peer and the size, for the verdict
        (which puts "rank <this rank> hung: " before it)."""
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        gloo = text.split("] ", 1)[-1][:200]        # gloo prefixes its source location
        peer, size = what["peer"], f"{what['bytes']:,} bytes"
        tag = f", tag {what['tag']}" if what["tag"] else ""
        during = f", {what['phase']}" if what["phase"] else ""
        never = ", never waited for" if not waited else ""
        if what["send"]:
            op = f"send to rank {peer} ({size}{tag}{during}{never})"
            missing = f"rank {peer} posted no matching recv from rank {self.rank}"
        else:
            op = f"recv from rank {peer} ({size}{tag}{during}{never})"
            missing = f"rank {peer} sent no matching message to rank {self.rank}"
        advice = PAIRING_ADVICE         # replaced by the cause where the verdict can name it (a cycle of sends)
        if "timed out" in gloo.lower():
            return f"{op} timed out: {missing} of that size. {advice}"
        if "by peer" in gloo.lower():      # the peer's own op timed out first, and gloo closed the pair
            return (f"{op} found no partner: rank {peer} timed out on its side first and closed the "
                    f"connection; {missing} of that size. {advice}")
        return f"{op} failed: {gloo}"
