"""Question 6.5's scenario, "tp_forward_2d": the students' 2D-sharded forward of one
FFN block on a 2 x 2 gloo mesh.

Trusted half (`prepare`): the mesh's two axes as process groups ("x", "y"),
the block's BF16 tensors from the run's seed (question 3's `comm4d_mesh`:
small integers, so every BF16 sum is exact), this chip's shards
In[B_X, D_Y], W_in[D_X, F_Y], W_out[F_Y, D_X], and the single-process
forward's Out block for this chip. Student half: the student's
`ffn_forward_2d(inputs, w_in, w_out, x_group, y_group)`, its collectives
run by the trusted process on the named axis. Trusted half (`report`): the
collectives traced after set-up, as [op, axis, payload bytes], and whether
the returned block equals the single-process one. A kit module: it imports
only the kit, relatively, and runs no torch op at import.
"""
from __future__ import annotations

from . import Scenario, claimed, register
from ..checks.fsdp import GATHERS, SCATTERS
from ..comm4d_mesh import block, block_tensors

X = Y = 2


def _kind(op: str) -> str:
    """A traced op's kind: every form of an all-gather or a reduce-scatter by one name."""
    return "all_gather" if op in GATHERS else "reduce_scatter" if op in SCATTERS else op


@register
class Forward2D(Scenario):
    name = "tp_forward_2d"

    def prepare(self, rank, world_size: int, tokens: int, d_model: int, d_ff: int, seed: int):
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        mesh = init_device_mesh("cpu", (X, Y), mesh_dim_names=("x", "y"))
        coordinate = mesh.get_coordinate()
        assert coordinate is not None                   # every rank is in the mesh
        i, j = coordinate
        rank.groups.update(x=mesh.get_group("x"), y=mesh.get_group("y"))
        inputs, w_in, w_out = block_tensors(tokens, d_model, d_ff, seed)
        rank.memo.update(
            expected=block((inputs @ w_in) @ w_out, i, X, j, Y),
            axes={"ranks " + ",".join(map(str, dist.get_process_group_ranks(g))): axis
                  for axis, g in rank.groups.items()},
            after=rank.tracer.seq)                      # the student's collectives come after set-up
        shards = {"inputs": block(inputs, i, X, j, Y), "w_in": block(w_in, i, X, j, Y),
                  "w_out": block(w_out, j, Y, i, X)}
        return {}, shards

    def student(self, ctx, tensors):
        import torch
        out = ctx.student().ffn_forward_2d(tensors["inputs"], tensors["w_in"], tensors["w_out"],
                                           ctx.groups["x"], ctx.groups["y"])
        return {"out": torch.as_tensor(out).float().tolist()}

    def report(self, rank, result, **args):
        import torch
        events = [e for e in rank.tracer.collectives() if e["seq"] > rank.memo["after"]]
        expected = rank.memo["expected"].float()
        try:
            output_ok = bool(torch.equal(torch.tensor(claimed(result, "out"), dtype=torch.float32), expected))
        except (TypeError, ValueError, RuntimeError):
            output_ok = False
        return {"collectives": [[_kind(e["op"]), rank.memo["axes"].get(e["group"], e["group"]), e["bytes"]]
                                for e in events],
                "output_ok": output_ok}
