"""Question 3's scenario: the reference 2D-sharded forward of one block on an
X x Y mesh (`comm4d_mesh`) runs in the ranks' trusted processes,
traced; the student's process only answers block_collective_bytes for the
same shapes. Returns, per rank, the measured volume of each collective,
whether each ran on its mesh axis, whether the sharded output equals the
unsharded forward, and the student's answer."""
from __future__ import annotations

from . import Scenario, claimed, register
from ..schema import Fields, Plain
from ..comm4d_mesh import run_on_mesh


@register
class MeshForward(Scenario):
    name = "comm4d_mesh_forward"

    def result_schema(self, **_):
        return Fields({"student": Plain()})        # any plain answer: wrong ones are the comparator's to say

    def prepare(self, rank, world_size: int, tokens: int, d_model: int, d_ff: int, x: int, y: int, seed: int):
        rank.memo["mesh"] = run_on_mesh(tokens, d_model, d_ff, x, y, seed, rank.tracer)
        return dict(tokens=tokens, d_model=d_model, d_ff=d_ff, x=x, y=y), {}

    def student(self, ctx, tensors, tokens, d_model, d_ff, x, y):
        return {"student": ctx.student().block_collective_bytes(tokens, d_model, d_ff, x, y)}

    def report(self, rank, result, **args):
        return {**rank.memo["mesh"], "student": claimed(result, "student")}
