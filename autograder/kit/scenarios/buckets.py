"""Question 4's scenario: train a toy model with the student's BucketedDDP.

Rank r starts from weights drawn from seed + r (so only a working broadcast
makes the ranks agree) and trains on its own rows of the global batch; the
seed is the grading's secret and only the rank's trusted process knows the
other ranks' weights and rows. Returns, per rank: the final state
(parameters and buffers by name; claimed by the student's process); per
step, every trainable parameter's .grad right after
finish_gradient_synchronization() returned ("grads", by name; claimed);
per step, the all-reduces the trusted process performed [bytes, gradients
the student's process had reported before it, async, issued inside
finish_gradient_synchronization()], the number of gradients reported and
the order in which they were ("grad_order", trainable parameter indices);
the broadcasts of the whole run and the collectives performed while
BucketedDDP was constructed (none of either: the ranks kept their different
initial weights); and the student's own assign_buckets for the run's model
and cap, the layout their BucketedDDP is asked to use: its buckets' sorted
byte sizes ("layout_bytes") and the buckets themselves ("layout"), None
when it gave no layout of the model's trainable parameters.
"""
from __future__ import annotations

from . import Scenario, claimed, rank_share, register, starting_model
from ..schema import STATE, TENSOR_VALUES, Fields, Int, ListOf, MapOf, Null, OneOf
from ..toy_models import build_model, gradient_lists, make_optimizer, state_lists, train, trainable_bytes

MiB = 2**20          # bucket_size_mb is in MB of 2**20 bytes, as PyTorch DDP's bucket_cap_mb
MAX_BUCKETS = 10_000


def _report_gradients(module, ctx) -> None:
    """Tell the trusted process when each trainable parameter's gradient is
    ready. Registered before the student's hooks: for the same parameter it fires first."""
    for i, p in enumerate(q for q in module.parameters() if q.requires_grad):
        p.register_post_accumulate_grad_hook(lambda _p, i=i: ctx.mark("grad", param=i))


def _plain_layout(layout) -> list[list[int]] | None:
    """The student's layout as plain lists of ints (student side: what the channel can carry), or None."""
    if not isinstance(layout, (list, tuple)) or len(layout) > MAX_BUCKETS:
        return None
    out = []
    for bucket in layout:
        if not isinstance(bucket, (list, tuple)) or not all(isinstance(i, int) for i in bucket):
            return None
        out.append([int(i) for i in bucket])
    return out


def layout_bytes(layout, param_bytes: list[int]) -> list[int] | None:
    """Sorted bytes of the buckets of `layout` (untrusted) when it places every trainable
    parameter (indices into `param_bytes`) in exactly one non-empty bucket, else None."""
    if not isinstance(layout, list) or not all(isinstance(b, list) and b for b in layout):
        return None
    placed = [i for bucket in layout for i in bucket]
    if sorted(placed) != list(range(len(param_bytes))) or not all(type(i) is int for i in placed):
        return None
    return sorted(sum(param_bytes[i] for i in bucket) for bucket in layout)


@register
class DdpTrain(Scenario):
    name = "ddp_train"
    # "sync": finish_gradient_synchronization() of step k is called now (`report`: what it issued)
    mark_fields = {"grad": Fields({"param": Int(0)}), "sync": Fields({"k": Int(0)})}

    def phases(self, steps: int, **_):
        """"construction", "step 1" ... "step <steps>", "layout"."""
        return {"construction", "layout", *(f"step {k}" for k in range(1, steps + 1))}

    def result_schema(self, steps: int, **_):
        grads = ListOf(MapOf(OneOf((Null(), TENSOR_VALUES))), steps)
        return Fields({"state": STATE, "grads": grads, "layout": OneOf((Null(), ListOf(ListOf(Int()), MAX_BUCKETS)))})

    def prepare(self, rank, world_size: int, model: str, bucket_size_mb: float, optimizer: str,
                steps: int, seed: int):
        tensors = rank_share(model, seed, seed + rank.rank, world_size, rank.rank)
        return dict(model=model, bucket_size_mb=bucket_size_mb, optimizer=optimizer, steps=steps), tensors

    def student(self, ctx, tensors, model: str, bucket_size_mb: float, optimizer: str, steps: int):
        module = starting_model(model, tensors)
        _report_gradients(module, ctx)
        ctx.phase("construction")
        ddp = ctx.student().BucketedDDP(module, bucket_size_mb)
        opt = make_optimizer(optimizer, module.parameters())
        grads: list[dict] = []

        def synchronized() -> None:
            # the docstring's promise, read right after the call returns (Task 4.5)
            ctx.mark("sync", k=len(grads) + 1)
            ddp.finish_gradient_synchronization()
            grads.append(gradient_lists(module))
        train(ddp, opt, tensors["inputs"], tensors["targets"], steps, after_backward=synchronized,
              on_step=lambda k: ctx.phase(f"step {k + 1}"))
        # the layout the student's BucketedDDP is asked to use (`assign_buckets` of its trainable
        # parameters' bytes and the cap), after the run: 4.6 counts the student's own buckets
        ctx.phase("layout")
        try:
            layout = _plain_layout(ctx.student().assign_buckets(trainable_bytes(module), bucket_size_mb * MiB))
        except Exception:  # noqa: BLE001 - a broken assign_buckets is task 4.1's to report
            layout = None
        return {"state": state_lists(module), "grads": grads, "layout": layout}

    def report(self, rank, result, model: str, steps: int, **args):
        tracer = rank.tracer
        synced = {m["k"]: m["seq"] for m in rank.marks if m["kind"] == "sync"}
        per_step = []
        for k in range(1, steps + 1):
            phase, sync = f"step {k}", synced.get(k, tracer.seq + 1)
            per_step.append({
                "all_reduces": [[e["bytes"], e["grads_before"], e["async"], e["seq"] > sync]
                                for e in tracer.collectives(phase, "all_reduce")],
                "other": sorted({e["op"] for e in tracer.collectives(phase)} - {"all_reduce"}),
                "grads": sum(1 for e in tracer.events if e["kind"] == "grad" and e["phase"] == phase),
                "grad_order": [e["param"] for e in tracer.events if e["kind"] == "grad" and e["phase"] == phase],
            })
        sizes = trainable_bytes(build_model(model, 0))
        layout = claimed(result, "layout")
        placed = layout_bytes(layout, sizes)
        return {"state": claimed(result, "state"), "grads": claimed(result, "grads"), "steps": per_step,
                "broadcasts": len(tracer.collectives(None, "broadcast")),
                "construction_collectives": len(tracer.collectives("construction")),
                "layout_bytes": placed, "layout": layout if placed is not None else None}
