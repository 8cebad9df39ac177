"""Question 5's scenario: train the FFN stack with the student's OneFOneBPipeline.

Rank r holds stage r of p: the blocks `stage_blocks(r, p)` of the course's
toy FFN model (`toy_models`), starting from weights drawn from
the grading's secret seed, and only those. Only stage 0 is given the
mini-batch's inputs and only the last stage its targets (every other stage
gets zeros of their shapes), so activations and gradients can cross stages
only by the point-to-point ops the trusted processes perform and trace
(`sandbox.gloo.ranks.p2p`). Returns, per rank:

- "stage", "num_stages": the rank's place (the trusted process's, not a claim);
- "state": the stage's weights after training, named as in the whole model
  ("blocks.<i>.w_in.weight"; claimed by the student's process);
- "steps": per step, "p2p": the point-to-point ops the trusted process
  performed, in the order asked for, [["send" | "recv", peer, bytes,
  issued, waited], ...], where `issued` is the op's place among the ops the
  rank has issued (its trace's running "seq") and `waited` the count of
  issued ops when the student's process first waited for it (None: never),
  so the two order issues and waits on one scale; "other": any other
  collective; "saved": the peak number of micro-batches whose activations
  the stage's autograd graphs held during the step, counted in the
  student's process by saved-tensor hooks the harness wraps around `step`
  (a claim: docs/trust.md; `checks.pipeline.in_flight` also derives the schedule's
  own in-flight count from "p2p", which is trusted).

The student's `step(inputs, targets, loss_fn)` (docs/spec.md, Task 5.9)
gets, on every stage, the mini-batch's inputs and targets as tensors of
their shapes (m micro-batches of PIPE_ROWS rows; the values only where they
are read) and `loss_fn` = nn.functional.mse_loss; it leaves in each
parameter's .grad the gradient of the mini-batch's mean loss. The harness
then steps the optimizer.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from . import Scenario, claimed, register
from ..schema import STATE, Fields, Int, ListOf, Null, OneOf
from ..tracing import P2P_OPS
from ..toy_models import (PIPE_D_MODEL, PIPE_ROWS, build_ffn, ffn_stage, make_optimizer,
                                           pipeline_batch, stage_state_names)


class _Held:
    """One saved tensor, counted in its ledger while autograd keeps it."""

    __slots__ = ("ledger", "tensor", "nbytes")

    def __init__(self, ledger: dict, tensor: torch.Tensor):
        self.ledger, self.tensor = ledger, tensor
        self.nbytes = tensor.numel() * tensor.element_size()
        ledger["live"] += self.nbytes
        ledger["peak"] = max(ledger["peak"], ledger["live"])

    def __del__(self):
        self.ledger["live"] -= self.nbytes


class SavedActivations:
    """Bytes of activations the stage's autograd graphs hold: tensors saved for
    backward while one of the stage's modules runs its forward (so the last
    stage's loss is not counted), the stage's own weights excluded. The hooks
    on the modules are registered before the student's pipeline exists;
    `hooks()` is the saved-tensor context the harness wraps around a step."""

    def __init__(self, module: nn.Module):
        self.weights = {p.untyped_storage().data_ptr() for p in module.parameters()}
        self.inside = 0
        self.ledger = {"live": 0, "peak": 0}
        for m in module.modules():
            m.register_forward_pre_hook(self._enter)
            m.register_forward_hook(self._leave)

    def _enter(self, *_):
        self.inside += 1

    def _leave(self, *_):
        self.inside -= 1

    def _pack(self, t: torch.Tensor):
        if self.inside <= 0 or t.untyped_storage().data_ptr() in self.weights:
            return t
        return _Held(self.ledger, t)

    @staticmethod
    def _unpack(saved):
        return saved.tensor if isinstance(saved, _Held) else saved

    def start(self) -> dict:
        """A fresh count (tensors still held from before go to the old ledger)."""
        self.ledger = {"live": 0, "peak": 0}
        return self.ledger

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)


def _one_microbatch_bytes(module: nn.Module, saved: SavedActivations, stage: int) -> int:
    """What one micro-batch's forward through this stage saves (the unit of the count)."""
    ledger = saved.start()
    x = torch.zeros(PIPE_ROWS, PIPE_D_MODEL, requires_grad=stage > 0)
    with saved.hooks():
        out = module(x)
    per_microbatch = ledger["peak"]
    del out
    return per_microbatch


@register
class PipelineTrain(Scenario):
    name = "pipeline_train"

    def phases(self, steps: int, **_):
        """"construction", "step <k>" and "optimizer <k>" for each step k from 1, "state"."""
        return {"construction", "state", *(f"{part} {k}" for k in range(1, steps + 1)
                                           for part in ("step", "optimizer"))}

    def result_schema(self, **_):
        return Fields({"state": STATE, "saved": ListOf(OneOf((Int(0), Null())))})

    def prepare(self, rank, world_size: int, microbatches: int, optimizer: str, steps: int, seed: int):
        """Stage r's initial weights; the inputs to stage 0 and the targets to the last
        stage (the other stages get zeros of their shapes)."""
        stage = ffn_stage(build_ffn(seed), rank.rank, world_size)
        tensors = {f"init.{k}": v.detach().clone() for k, v in stage.state_dict().items()}
        inputs, targets = pipeline_batch(seed, microbatches)
        tensors["inputs"] = inputs if rank.rank == 0 else torch.zeros_like(inputs)
        tensors["targets"] = targets if rank.rank == world_size - 1 else torch.zeros_like(targets)
        return dict(microbatches=microbatches, optimizer=optimizer, steps=steps), tensors

    def student(self, ctx, tensors, microbatches: int, optimizer: str, steps: int):
        stage, num_stages = ctx.rank, ctx.world_size
        module = ffn_stage(build_ffn(0), stage, num_stages)
        with torch.no_grad():
            module.load_state_dict({k[len("init."):]: v for k, v in tensors.items() if k.startswith("init.")})
        saved = SavedActivations(module)
        unit = _one_microbatch_bytes(module, saved, stage)
        ctx.phase("construction")
        pipe = ctx.student().OneFOneBPipeline(module, stage, num_stages, microbatches)
        opt = make_optimizer(optimizer, module.parameters())
        counts = []
        for k in range(1, steps + 1):
            ledger = saved.start()
            ctx.phase(f"step {k}")
            with saved.hooks():
                pipe.step(tensors["inputs"], tensors["targets"], nn.functional.mse_loss)
            ctx.phase(f"optimizer {k}")
            counts.append(math.ceil(ledger["peak"] / unit - 0.01) if unit else None)
            opt.step()
            opt.zero_grad(set_to_none=True)
        ctx.phase("state")
        return {"state": {k: v.detach().tolist() for k, v in module.state_dict().items()}, "saved": counts}

    def report(self, rank, result, world_size: int, microbatches: int, optimizer: str, steps: int, seed: int):
        """The weights and the saved counts are the student's claims; the
        point-to-point ops, their peers, sizes and order are what the trusted
        process performed."""
        names = stage_state_names(rank.rank, world_size)
        state = claimed(result, "state")
        if isinstance(state, dict):
            state = {names.get(str(k), str(k)[:100]): v for k, v in state.items()}
        counts = claimed(result, "saved")
        counts = counts if isinstance(counts, list) and len(counts) == steps else [None] * steps
        per_step = []
        for k in range(1, steps + 1):
            events = rank.tracer.collectives(f"step {k}")
            count = counts[k - 1]
            per_step.append({
                "p2p": [["send" if "send" in e["op"] else "recv", e.get("peer"), e["bytes"], e["seq"], e.get("waited")]
                        for e in events if e["op"] in P2P_OPS],
                "other": sorted({e["op"] for e in events if e["op"] not in P2P_OPS}),
                "saved": count if isinstance(count, int) and not isinstance(count, bool) else None,
            })
        return {"stage": rank.rank, "num_stages": world_size, "state": state, "steps": per_step}
