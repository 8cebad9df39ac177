"""Collective tracing inside a gloo rank, with no cooperation from student code.

torch offers no per-call trace of gloo collectives that a grader can read
back (the flight recorder covers NCCL), so the public `torch.distributed`
functions are wrapped, in both namespaces student code may use
(`torch.distributed.X` and `torch.distributed.distributed_c10d.X`), before
the student module is imported. Each call records one plain-dict event:

    {"kind": "collective", "op": "all_reduce", "seq": 3, "group": "world",
     "bytes": 480, "dtype": "torch.float32", "async": True,
     "phase": "step 1", "grads_before": 2, "start": 812.0131, "end": 812.0135}

`bytes` is the payload: the largest tensor argument (a list counts as the
sum of its tensors), i.e. the reduced tensor, the gathered tensor of an
all-gather, the tensor before scattering of a reduce-scatter, the message
of a point-to-point op. A point-to-point event also names its "peer" (the
rank sent to or received from) and, once something waited for it,
"waited": how many ops this rank had issued by then (its own "seq" for a
blocking send or recv), which places the wait among the issues: a pipeline
stage's recv is waited for when its data is needed. `grads_before`
places the call relative to the backward pass: how many gradients of the
watched module had been produced in this phase when the call was made
(`watch_gradients` registers its post-accumulate-grad hooks before any
student hook, so for the same parameter it fires first). Gradient events
are {"kind": "grad", "param": i, "phase": ..., "t": ...} and phase changes
{"kind": "phase", "name": ..., "t": ...}.

Times ("start", "end", "t") are `time.monotonic()` seconds, one clock for
every process of the machine, so the ranks' events can be drawn on one
timeline (`timelines.overlap`). A collective's "end" is when it
completed: when the call returned, or for an async one when its work
finished (its future's callback; else when `wait()` returned; None if
neither was seen).

The tracer also reports where a rank is blocked: `status(label)` before a
collective or a wait, `status(None)` after, so the parent can say which
rank hung in which collective.

With `hold_results` (the kit's local ranks), an async collective writes a
private copy of its result tensor, copied into the caller's only when the
work is waited for, and `is_completed()` waits: as in a grading, where the
student's process gets a result only from `wait()` (`ranks.proxy`), a
bucket read before its all-reduce is waited for reads the same stale values
every time, locally as in the grader, instead of racing with gloo.

An optional `check(op, arguments)` runs inside every traced call, after
`status(label)` and before the op: the grader's trusted ranks check the
ranks' collective fingerprints there (`sandbox.gloo.ranks.fingerprint`),
so a check that fails, fails in that collective. The kit's local ranks
leave it to torch (TORCH_DISTRIBUTED_DEBUG).
"""
from __future__ import annotations

import inspect
import re
import time
from typing import Any, Callable

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

TRACED_OPS = ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor",
              "all_gather_single", "reduce_scatter", "reduce_scatter_tensor", "reduce_scatter_single",
              "_all_gather_base", "_reduce_scatter_base", "all_to_all", "all_to_all_single",
              "gather", "scatter", "barrier", "send", "recv", "isend", "irecv")
P2P_OPS = ("send", "recv", "isend", "irecv")
# the tensor an async collective writes its result into, by op: with `hold_results`, the op writes a
# private copy, which reaches this tensor only when the work is waited for (`TracedWork.wait`)
RESULT_ARGS = {"all_reduce": "tensor", "broadcast": "tensor", "all_gather_into_tensor": "output_tensor",
               "_all_gather_base": "output_tensor", "all_gather_single": "output_tensor",
               "reduce_scatter_tensor": "output", "_reduce_scatter_base": "output", "reduce_scatter_single": "output"}
PEER_ARGS = ("dst", "src", "group_dst", "group_src")


def _payload(value: Any) -> tuple[int, str | None]:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size(), str(value.dtype)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return sum(v.numel() * v.element_size() for v in value), str(value[0].dtype)
    return 0, None


class TracedWork:
    """The Work of an async collective; its wait() reports where the rank blocks and, where
    the result was held back (`Tracer.hold_results`), writes it into the caller's tensor."""

    def __init__(self, work, label: str, tracer: "Tracer", event: dict, held: tuple | None = None):
        self._work, self._label, self._tracer, self._event = work, label, tracer, event
        self._held = held                   # (the caller's tensor, the private copy the op writes)
        try:
            work.get_future().add_done_callback(lambda _f: _ended(event))
        except (AttributeError, RuntimeError):       # a backend without futures: wait() will say
            pass

    def wait(self, *args, **kwargs):
        label = f"waiting for {self._label}"
        if "peer" in self._event and self._event.get("waited") is None:
            self._event["waited"] = self._tracer.seq
        self._tracer.enter(label)
        try:
            done = self._work.wait(*args, **kwargs)
            _ended(self._event)
            if self._held is not None:
                target, copy = self._held
                self._held = None
                with torch.no_grad():
                    target.copy_(copy)
            return done
        except BaseException:
            self._tracer.failed_in = label
            raise
        finally:
            self._tracer.leave()

    def is_completed(self) -> bool:
        """Waits (as the grader's proxy does): a poll would race with the collective."""
        self.wait()
        return True

    def __getattr__(self, name):
        return getattr(self._work, name)


def _ended(event: dict) -> None:
    if event.get("end") is None:
        event["end"] = time.monotonic()


class Tracer:
    def __init__(self, status: Callable[[str | None], None] = lambda label: None,
                 check: Callable[[str, dict], None] | None = None, hold_results: bool = False):
        self.check = check                   # (op name, its arguments by name), before each op
        # an async collective's result reaches the caller's tensor only when it is waited for, as in
        # a grading (`ranks.proxy`): the kit's local ranks then race no more than the grader's
        self.hold_results = hold_results
        self.events: list[dict] = []
        self.phase = "setup"
        self.grads = 0
        self.seq = 0
        self.current: str | None = None      # the collective this rank is blocked in
        self.last: str | None = None         # the last collective it called
        self.failed_in: str | None = None    # the collective (or wait) that raised
        self._status = status
        self._originals: dict[tuple[Any, str], Callable] = {}
        self._depth = 0                      # > 0 inside a traced call: torch's own nested calls
                                             # (all_gather_into_tensor -> all_gather_single) count once

    # ---- phases and the backward pass ---------------------------------------
    def set_phase(self, name: str) -> None:
        self.phase, self.grads = name, 0
        self.events.append({"kind": "phase", "name": name, "t": time.monotonic()})

    def watch_gradients(self, module: torch.nn.Module) -> None:
        """Record when each trainable parameter's gradient is produced."""
        for i, p in enumerate(q for q in module.parameters() if q.requires_grad):
            p.register_post_accumulate_grad_hook(lambda _p, i=i: self.gradient_ready(i))

    def gradient_ready(self, i: int) -> None:
        self.grads += 1
        self.events.append({"kind": "grad", "param": i, "phase": self.phase, "t": time.monotonic()})

    def collectives(self, phase: str | None = None, op: str | None = None) -> list[dict]:
        return [e for e in self.events if e["kind"] == "collective"
                and (phase is None or e["phase"] == phase) and (op is None or e["op"] == op)]

    def reset(self) -> None:
        self.events.clear()
        self.failed_in = None
        self.set_phase("setup")

    # ---- where the rank is ---------------------------------------------------
    def enter(self, label: str) -> None:
        self.current = label
        self._status(label)

    def leave(self) -> None:
        self.current = None
        self._status(None)

    def where(self) -> str:
        if self.failed_in or self.current:
            return f"in {self.failed_in or self.current}"
        return f"after {self.last}" if self.last else "before any collective"

    # ---- wrapping torch.distributed -------------------------------------------
    def install(self) -> None:
        for name in TRACED_OPS:
            original: Callable | None = getattr(c10d, name, None)
            if original is None:
                continue
            wrapped = self._wrap(name, original)
            for namespace in (dist, c10d):
                current: Callable | None = getattr(namespace, name, None)
                if current is original:
                    self._originals[(namespace, name)] = original
                    setattr(namespace, name, wrapped)

    def uninstall(self) -> None:
        for (namespace, name), original in self._originals.items():
            setattr(namespace, name, original)
        self._originals.clear()

    def _held(self, name: str, bound: dict) -> tuple | None:
        """(the caller's result tensor, a private copy for the op to write), with `hold_results`."""
        target = bound.get(RESULT_ARGS.get(name, ""))
        if not self.hold_results or not isinstance(target, torch.Tensor):
            return None
        return target, target.detach().clone()

    def _group_label(self, group) -> str:
        if group is None or group is c10d.GroupMember.WORLD:
            return "world"
        return "ranks " + ",".join(map(str, dist.get_process_group_ranks(group)))

    def _wrap(self, name: str, fn: Callable) -> Callable:
        bind = _binder(fn)
        tracer = self

        def traced(*args, **kwargs):
            if tracer._depth:
                return fn(*args, **kwargs)
            try:
                bound = bind(args, kwargs)
            except TypeError:
                return fn(*args, **kwargs)          # let torch raise its own error
            size, dtype = max((_payload(v) for v in bound.values()), key=lambda x: x[0],
                              default=(0, None))
            is_async = bool(bound.get("async_op", False)) or name in ("isend", "irecv")
            tracer.seq += 1
            event = {"kind": "collective", "op": name, "seq": tracer.seq,
                     "group": tracer._group_label(bound.get("group")), "bytes": size,
                     "dtype": dtype, "async": is_async, "phase": tracer.phase,
                     "grads_before": tracer.grads, "start": time.monotonic(), "end": None}
            peer = ""
            if name in P2P_OPS:
                given = next((bound[k] for k in PEER_ARGS if bound.get(k) is not None), None)
                event["peer"] = given if isinstance(given, int) and not isinstance(given, bool) else None
                event["waited"] = None if is_async else tracer.seq
                peer = f" {'to' if 'send' in name else 'from'} rank {event['peer']}"
            tracer.events.append(event)
            label = f"{name}{peer} #{tracer.seq} ({size:,} bytes, {tracer.phase})"
            tracer.last = label
            tracer.enter(label)
            tracer._depth += 1
            try:
                if tracer.check is not None:
                    tracer.check(name, bound)
                held = tracer._held(name, bound) if is_async else None
                work = fn(**{**bound, RESULT_ARGS[name]: held[1]}) if held else fn(*args, **kwargs)
            except BaseException:
                tracer.failed_in = label
                raise
            finally:
                tracer._depth -= 1
                tracer.leave()
            if is_async and work is not None:
                return TracedWork(work, label, tracer, event, held)
            _ended(event)
            return work

        traced.__name__ = traced.__qualname__ = name
        traced.__doc__ = fn.__doc__
        # ignore: mypy does not model attributes set on a function (functools.wraps would copy more)
        traced.__wrapped__ = fn             # type: ignore[attr-defined]
        return traced


def _binder(fn: Callable) -> Callable[[tuple, dict], dict]:
    """`inspect.signature(fn).bind(*args, **kwargs).arguments`, the arguments given by name in the
    parameters' order (defaults not filled in), or TypeError: a fast path for a signature of plain
    parameters (every torch.distributed op's), which a traced collective binds every time."""
    signature = inspect.signature(fn)
    params = list(signature.parameters.values())
    plain = all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params)
    names = [p.name for p in params]
    known = set(names)
    required = {p.name for p in params if p.default is inspect.Parameter.empty}

    def bind(args: tuple, kwargs: dict) -> dict:
        if not plain or len(args) > len(names) or not known.issuperset(kwargs):
            return dict(signature.bind(*args, **kwargs).arguments)
        given = dict(zip(names, args))
        if not given.keys().isdisjoint(kwargs) or not required.issubset(given.keys() | kwargs.keys()):
            return dict(signature.bind(*args, **kwargs).arguments)     # torch's TypeError, from inspect
        given.update(kwargs)
        return {n: given[n] for n in names if n in given}
    return bind


_FINGERPRINT = re.compile(r"Rank (\d+) is running collective: CollectiveFingerPrint\("
                          r"SequenceNumber=(\d+), OpType=(\w+), TensorShape=\[([^\]]*)\]")


def explain(exc: BaseException) -> str | None:
    """A one-line reading of torch's collective-mismatch error (DETAIL mode), or None."""
    text = str(exc)
    found = _FINGERPRINT.findall(text)
    if "Detected mismatch between collectives" not in text or len(found) < 2:
        return None
    said = [f"rank {r} called {op.lower()} of shape [{shape}] as its collective #{seq}"
            for r, seq, op, shape in found[:2]]
    return "the ranks called different collectives: " + ", but ".join(said)
