"""Question 4's scenario: train a toy model with the student's BucketedDDP.

Rank r starts from weights drawn from seed + r (so only a working broadcast
makes the ranks agree) and trains on its own rows of the global batch; the
seed is the grading's secret and only the rank's trusted process knows the
other ranks' weights and rows. Returns, per rank: the final state
(parameters and buffers by name; claimed by the student's process) and, per
step, the all-reduces the trusted process performed [bytes, gradients the
student's process had reported before it, async] and the number of
gradients reported.
"""
from __future__ import annotations

from . import Scenario, claimed, rank_share, register, starting_model
from ..toy_models import make_optimizer, state_lists, train


def _report_gradients(module, ctx) -> None:
    """Tell the trusted process when each trainable parameter's gradient is
    ready. Registered before the student's hooks: for the same parameter it fires first."""
    for i, p in enumerate(q for q in module.parameters() if q.requires_grad):
        p.register_post_accumulate_grad_hook(lambda _p, i=i: ctx.mark("grad", param=i))


@register
class DdpTrain(Scenario):
    name = "ddp_train"

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
        train(ddp, opt, tensors["inputs"], tensors["targets"], steps,
              after_backward=ddp.finish_gradient_synchronization,
              on_step=lambda k: ctx.phase(f"step {k + 1}"))
        return {"state": state_lists(module)}

    def report(self, rank, result, steps: int, **args):
        tracer = rank.tracer
        per_step = []
        for k in range(1, steps + 1):
            phase = f"step {k}"
            per_step.append({
                "all_reduces": [[e["bytes"], e["grads_before"], e["async"]]
                                for e in tracer.collectives(phase, "all_reduce")],
                "other": sorted({e["op"] for e in tracer.collectives(phase)} - {"all_reduce"}),
                "grads": sum(1 for e in tracer.events if e["kind"] == "grad" and e["phase"] == phase),
            })
        return {"state": claimed(result, "state"), "steps": per_step}
