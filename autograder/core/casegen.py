"""Random inputs shared by the questions' case generators. The engine seeds
`rng` (`plan.part_rng`); questions never seed themselves."""
from __future__ import annotations


def model_shapes(rng, k):
    """k random FFN shapes (d_model, d_ff, num_blocks): widths in multiples of
    128 up to the XXL scale, so they divide by every power-of-two mesh axis
    up to 128."""
    for _ in range(k):
        d = 128 * rng.randint(1, 160)
        yield d, 128 * rng.randint(1, 4 * d // 128 + 1), rng.randint(1, 200)
