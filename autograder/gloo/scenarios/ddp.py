"""Question 4's scenario: train a toy model with the student's BucketedDDP.

Rank r builds the model from seed + r (so only a working broadcast makes
the ranks agree), wraps it, and trains on its shard of the global batch.
Returns, per rank: the final state (parameters and buffers by name) and,
per step, the all-reduces [bytes, gradients produced before it, async]
and the number of gradients the backward pass produced.
"""
from __future__ import annotations

from autograder.gloo.scenarios import Context, scenario
from reference.toy_models import batch, build_model, make_optimizer, shard, state_lists, train


@scenario("ddp_train")
def ddp_train(ctx: Context, world_size: int, model: str, bucket_size_mb: float, optimizer: str,
              steps: int, seed: int) -> dict:
    module = build_model(model, seed + ctx.rank)
    inputs, targets = batch(model, seed, world_size)
    inputs, targets = shard(inputs, ctx.rank), shard(targets, ctx.rank)
    ctx.tracer.watch_gradients(module)              # before the student's hooks: fires first
    ctx.tracer.set_phase("construction")
    ddp = ctx.student().BucketedDDP(module, bucket_size_mb)
    opt = make_optimizer(optimizer, module.parameters())
    train(ddp, opt, inputs, targets, steps,
          after_backward=ddp.finish_gradient_synchronization,
          on_step=lambda k: ctx.tracer.set_phase(f"step {k + 1}"))
    per_step = []
    for k in range(1, steps + 1):
        phase = f"step {k}"
        per_step.append({
            "all_reduces": [[e["bytes"], e["grads_before"], e["async"]]
                            for e in ctx.tracer.collectives(phase, "all_reduce")],
            "other": sorted({e["op"] for e in ctx.tracer.collectives(phase)} - {"all_reduce"}),
            "grads": sum(1 for e in ctx.tracer.events if e["kind"] == "grad" and e["phase"] == phase),
        })
    return {"state": state_lists(module), "steps": per_step}
