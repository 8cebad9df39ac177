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
    # BEGIN SOLUTION
    # the step lasts m + p - 1 slots of (t_f + t_b); a stage works in m of them
    slots = m + p - 1
    idle = p - 1
    return idle / slots
    # END SOLUTION


def bubble_ratio(p: int, m: int) -> float:
    """Task 5.2. The bubble relative to the ideal step: the idle time divided
    by the time the same m micro-batches would take with no bubble at all.

    Returns a float (it can exceed 1 when there are few micro-batches).
    """
    # BEGIN SOLUTION
    idle_slots = p - 1
    useful_slots = m
    return idle_slots / useful_slots
    # END SOLUTION


def step_seconds(p: int, m: int, t_f: float, t_b: float) -> float:
    """Task 5.3. Seconds one GPipe or 1F1B step takes, bubble included.

    t_f and t_b are one micro-batch's forward and backward time on one
    stage. Returns seconds (a float).
    """
    # BEGIN SOLUTION
    # the last micro-batch's forward leaves the first stage after m forward
    # slots and reaches the end after p - 1 more; its backward comes back the same way
    slot = t_f + t_b
    return (m + p - 1) * slot
    # END SOLUTION


def interleaved_bubble_fraction(p: int, m: int, v: int) -> float:
    """Task 5.4. The bubble fraction when each stage holds v model chunks
    (interleaved 1F1B: stage s holds chunks s, s + p, s + 2p, ...).

    A chunk's forward and backward take 1/v of a whole stage's. v = 1 is
    the plain schedule of Task 5.1. Returns a float in [0, 1).
    """
    # BEGIN SOLUTION
    # fill and drain take (p - 1) chunk slots = (p - 1)/v stage slots,
    # against m stage slots of work
    fill_and_drain = (p - 1) / v
    return fill_and_drain / (m + fill_and_drain)
    # END SOLUTION


def inflight_microbatches(schedule: str, p: int, m: int, stage: int) -> int:
    """Task 5.5. The largest number of micro-batches whose activations `stage`
    holds at once (forward done, backward not yet), under `schedule`.

    schedule is "afab" (or "gpipe": every forward before any backward) or
    "1f1b" (warm-up forwards, then one forward and one backward in turn,
    then the remaining backwards). stage is in 0..p-1. Raises ValueError
    for another schedule name. Returns an int.
    """
    # BEGIN SOLUTION
    if schedule in ("afab", "gpipe"):
        return m
    if schedule == "1f1b":
        warmup = p - stage - 1
        # the warm-up forwards, plus the forward just before the first backward;
        # after that each backward frees one micro-batch as a forward adds one
        return min(m, warmup + 1)
    raise ValueError(f"unknown schedule {schedule!r}: use 'afab', 'gpipe' or '1f1b'")
    # END SOLUTION


def stage_activation_bytes(schedule: str, d_model: int, d_ff: int, num_blocks: int, p: int, m: int,
                           tokens_per_microbatch: int, stage: int) -> int:
    """Task 5.6. Peak bytes of activations `stage` keeps saved for backward.

    The stage holds num_blocks / p of the model's blocks (num_blocks is a
    multiple of p). Count one micro-batch's saved activations on those
    blocks as in Task 1.3 (BF16, no checkpointing), for the peak number of
    micro-batches in flight of Task 5.5. Returns an int (bytes).
    """
    # BEGIN SOLUTION
    bf16 = 2
    blocks = num_blocks // p
    # Task 1.3 for this stage's blocks and one micro-batch: each block saves
    # the inputs of W_in [T, d_model] and of W_out [T, d_ff]
    one_microbatch = blocks * tokens_per_microbatch * (d_model + d_ff) * bf16
    return one_microbatch * inflight_microbatches(schedule, p, m, stage)
    # END SOLUTION


def p2p_bytes_per_step(d_model: int, tokens_per_microbatch: int, m: int, bytes_per_value: int = 2) -> int:
    """Task 5.7. Bytes that cross one stage boundary in one step, in both
    directions: the activations sent forward and the gradients sent back.

    Returns an int (bytes).
    """
    # BEGIN SOLUTION
    one_tensor = tokens_per_microbatch * d_model * bytes_per_value   # [T, d_model]
    forward = m * one_tensor     # each micro-batch's output goes to the next stage
    backward = m * one_tensor    # and its gradient comes back
    return forward + backward
    # END SOLUTION


def min_microbatches(p: int, target_fraction: float):
    """Task 5.8. The fewest micro-batches m >= 1 whose bubble fraction
    (Task 5.1) is at most target_fraction (equal counts as reaching it).

    Returns an int, or None when no number of micro-batches reaches the
    target.
    """
    # BEGIN SOLUTION
    if p == 1:
        return 1 if target_fraction >= 0 else None    # no bubble at all
    if target_fraction <= 0:
        return None                                    # the bubble never vanishes
    # (p-1)/(m+p-1) <= t  <=>  m >= (p-1)(1-t)/t
    m = max(1, math.ceil((p - 1) * (1 - target_fraction) / target_fraction))
    # the float division can land a hair off an exact tie (6/200 against 0.03):
    # settle the neighbours with the definition itself
    if m > 1 and bubble_fraction(p, m - 1) <= target_fraction:
        m -= 1
    elif bubble_fraction(p, m) > target_fraction:
        m += 1
    return m
    # END SOLUTION


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

    Hint: with gloo a blocking send returns only once its receive is
    posted: two neighbours that both send first wait for each other. Use
    isend for what you send (wait for all of them before step returns) and
    recv for what you need now.
    """

    def __init__(self, stage_module: torch.nn.Module, stage: int, num_stages: int, num_microbatches: int):
        # BEGIN SOLUTION
        self.module = stage_module
        self.stage, self.num_stages, self.m = stage, num_stages, num_microbatches
        self.is_first, self.is_last = stage == 0, stage == num_stages - 1
        # END SOLUTION

    def step(self, inputs: torch.Tensor, targets: torch.Tensor, loss_fn) -> float | None:
        """One training step's forwards and backwards, in 1F1B order."""
        # BEGIN SOLUTION
        m, s = self.m, self.stage
        micro_inputs = inputs.chunk(m)                  # m x (B/m, d_model)
        micro_targets = targets.chunk(m)
        held = []                   # (input, output) of each micro-batch forwarded, not yet backwarded
        sends: list = []            # isend works, waited for at the end
        losses = []

        def forward(i: int) -> None:
            if self.is_first:
                x = micro_inputs[i]
            else:
                x = torch.empty_like(micro_inputs[i])
                dist.recv(x, src=s - 1)                 # the activation from the previous stage
                x.requires_grad_()
            y = self.module(x)
            if self.is_last:
                y = loss_fn(y, micro_targets[i]) / m    # mean over the whole mini-batch
                losses.append(y.item())
            else:
                sends.append(dist.isend(y.detach(), dst=s + 1))
            held.append((x, y))

        def backward() -> None:
            x, y = held.pop(0)                          # the oldest micro-batch in flight
            if self.is_last:
                y.backward()
            else:
                grad = torch.empty_like(y)
                dist.recv(grad, src=s + 1)              # d loss / d output, from the next stage
                y.backward(grad)
            if not self.is_first:
                assert x.grad is not None               # the received activation requires grad
                sends.append(dist.isend(x.grad, dst=s - 1))

        warmup = min(self.num_stages - s - 1, m)
        for i in range(warmup):
            forward(i)
        for i in range(warmup, m):                      # steady state: 1 forward, 1 backward
            forward(i)
            backward()
        for _ in range(warmup):                         # cool-down
            backward()
        for work in sends:
            work.wait()
        return sum(losses) if self.is_last else None
        # END SOLUTION
