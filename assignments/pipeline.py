# Generated from solutions/ by `shardlab stubs`: fill in every function that
# raises NotImplementedError. Keep the names and signatures.
"""Question 5 — pipeline parallelism.

Conventions: the FFN-only model of question 1, its num_blocks blocks split
evenly over p stages numbered 0..p-1 (stage 0 holds the first blocks); a
step's mini-batch is split into m micro-batches of equal size. t_f and t_b
are one micro-batch's forward and backward seconds on one stage. Sizes in
bytes, times in seconds. Activations, and their gradients, cross a stage
boundary as [tokens_per_microbatch, d_model] tensors, BF16 (2 bytes per
value) unless bytes_per_value says otherwise. Schedules: "afab" (all
forwards then all backwards, GPipe's; "gpipe" is the same) and "1f1b".
"""
import math

import torch                        # noqa: F401  (Task 5.9 below)
import torch.distributed as dist    # noqa: F401  (Task 5.9 below)


def bubble_fraction(p: int, m: int) -> float:
    """Task 5.1. The fraction of a GPipe (or 1F1B) step a stage spends idle.

    Idle time divided by the whole step's time, with p stages and m
    micro-batches; 0.0 for a single stage. Returns a float in [0, 1).
    """
    raise NotImplementedError("Task 5.1: bubble_fraction")


def bubble_ratio(p: int, m: int) -> float:
    """Task 5.2. The bubble relative to the ideal step: the idle time divided
    by the time the same m micro-batches would take with no bubble at all.

    Returns a float (it can exceed 1 when there are few micro-batches).
    """
    raise NotImplementedError("Task 5.2: bubble_ratio")


def step_seconds(p: int, m: int, t_f: float, t_b: float) -> float:
    """Task 5.3. Seconds one GPipe or 1F1B step takes, bubble included.

    t_f and t_b are one micro-batch's forward and backward time on one
    stage. Returns seconds (a float).
    """
    raise NotImplementedError("Task 5.3: step_seconds")


def interleaved_bubble_fraction(p: int, m: int, v: int) -> float:
    """Task 5.4. The bubble fraction when each stage holds v model chunks
    (interleaved 1F1B: stage s holds chunks s, s + p, s + 2p, ...).

    A chunk's forward and backward take 1/v of a whole stage's. v = 1 is
    the plain schedule of Task 5.1. Returns a float in [0, 1).
    """
    raise NotImplementedError("Task 5.4: interleaved_bubble_fraction")


def inflight_microbatches(schedule: str, p: int, m: int, stage: int) -> int:
    """Task 5.5. The largest number of micro-batches whose activations `stage`
    holds at once (forward done, backward not yet), under `schedule`.

    schedule is "afab" (or "gpipe": every forward before any backward) or
    "1f1b" (warm-up forwards, then one forward and one backward in turn,
    then the remaining backwards). stage is in 0..p-1. Raises ValueError
    for another schedule name. Returns an int.
    """
    raise NotImplementedError("Task 5.5: inflight_microbatches")


def stage_activation_bytes(schedule: str, d_model: int, d_ff: int, num_blocks: int, p: int, m: int,
                           tokens_per_microbatch: int, stage: int) -> int:
    """Task 5.6. Peak bytes of activations `stage` keeps saved for backward.

    The stage holds num_blocks / p of the model's blocks (num_blocks is a
    multiple of p). Count one micro-batch's saved activations on those
    blocks as in Task 1.3 (BF16, no checkpointing), for the peak number of
    micro-batches in flight of Task 5.5. Returns an int (bytes).
    """
    raise NotImplementedError("Task 5.6: stage_activation_bytes")


def p2p_bytes_per_step(d_model: int, tokens_per_microbatch: int, m: int, bytes_per_value: int = 2) -> int:
    """Task 5.7. Bytes that cross one stage boundary in one step, in both
    directions: the activations sent forward and the gradients sent back.

    Returns an int (bytes).
    """
    raise NotImplementedError("Task 5.7: p2p_bytes_per_step")


def min_microbatches(p: int, target_fraction: float):
    """Task 5.8. The fewest micro-batches m >= 1 whose bubble fraction
    (Task 5.1) is at most target_fraction (equal counts as reaching it).

    Returns an int, or None when no number of micro-batches reaches the
    target.
    """
    raise NotImplementedError("Task 5.8: min_microbatches")


# ---- Task 5.9: OneFOneBPipeline (the distributed part) ----


class OneFOneBPipeline:
    """Task 5.9. One stage of a pipeline that runs each step in the 1F1B order.

    OneFOneBPipeline(stage_module, stage, num_stages, num_microbatches): rank
    `stage` holds `stage_module`, the blocks of stage `stage` of
    `num_stages` (the default process group is the pipeline: stage s talks
    only to ranks s - 1 and s + 1).

    step(inputs, targets, loss_fn), called on every rank: split `inputs`
    and `targets` into num_microbatches equal micro-batches along dim 0
    (only stage 0 reads the values of `inputs`, only the last stage those of
    `targets`; every stage may use their shapes) and run their forwards and
    backwards in the 1F1B order of the handout: warm-up forwards, then one
    forward and one backward (of the oldest micro-batch still held) in turn,
    then the cool-down backwards. How many warm-up forwards each stage runs
    is yours to work out (Task 5.5 counts what it holds).

    The last stage applies loss_fn to each micro-batch's output and
    target. Activations travel to stage s + 1 and their gradients back to
    stage s - 1, point to point between neighbours only, naming the peer of
    every operation. The grader reads your schedule off these messages:
    send each activation and gradient as soon as it is computed, and wait
    for a receive only when its data is needed; every send completes before
    step returns.

    What must hold: when step returns, the gradients accumulated in the
    stage's parameters' .grad are those of one full-batch step of the whole
    model with the mean loss over the mini-batch (Task 5.9). Do not step an
    optimizer. Returns the mini-batch's mean loss on the last stage (a
    float), None elsewhere.
    """

    def __init__(self, stage_module: torch.nn.Module, stage: int, num_stages: int, num_microbatches: int):
        raise NotImplementedError("Task 5.9: OneFOneBPipeline.__init__")

    def step(self, inputs: torch.Tensor, targets: torch.Tensor, loss_fn) -> float | None:
        """One training step's forwards and backwards, in 1F1B order."""
        raise NotImplementedError("Task 5.9: OneFOneBPipeline.step")
