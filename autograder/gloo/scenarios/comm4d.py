"""Question 3's scenario: the reference 2D-sharded forward of one block on an
X x Y mesh (reference/comm4d_mesh.py), traced, next to the student's
block_collective_bytes for the same shapes. Returns, per rank, the measured
volume of each collective, whether each ran on its mesh axis, whether the
sharded output equals the unsharded forward, and the student's answer."""
from __future__ import annotations

from autograder.gloo.scenarios import Context, scenario
from reference.comm4d_mesh import run_on_mesh


@scenario("comm4d_mesh_forward")
def comm4d_mesh_forward(ctx: Context, world_size: int, tokens: int, d_model: int, d_ff: int,
                        x: int, y: int, seed: int) -> dict:
    result = run_on_mesh(tokens, d_model, d_ff, x, y, seed, ctx.tracer)
    result["student"] = ctx.student().block_collective_bytes(tokens, d_model, d_ff, x, y)
    return result
