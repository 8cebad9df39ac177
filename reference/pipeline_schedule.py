"""The 1F1B schedule of one pipeline stage: the answer key of Task 5.9's order.

p stages (stage 0 holds the first blocks and the inputs, stage p-1 the last
blocks and the loss), a mini-batch of m micro-batches. Stage s does, for
micro-batches 0 .. m-1:

1. warm-up: w = min(p - s - 1, m) forwards (F). Stage s cannot run its first
   backward before the last stage has seen micro-batch 0, which takes
   p - s - 1 more forwards downstream; forwarding meanwhile keeps it busy.
2. steady state: one forward, then one backward (B), m - w times. Each
   backward frees the activations of the oldest micro-batch, so the stage
   never holds more than w + 1 = min(p - s, m) micro-batches.
3. cool-down: the last w backwards.

GPipe ("all forwards, all backwards", "afab") does the same work with every
micro-batch's activations held at once: m in flight.

    >>> "".join(kind for kind, _ in one_f_one_b(stage=0, num_stages=2, num_microbatches=4))
    'FFBFBFBB'
    >>> peak_in_flight(one_f_one_b(0, 4, 8)), peak_in_flight(gpipe(0, 4, 8))
    (4, 8)

The messages follow the schedule: a forward on stage s > 0 first receives
its activation from stage s - 1, and on s < p - 1 ends by sending its output
to stage s + 1; a backward on s < p - 1 first receives its gradient from
stage s + 1, and on s > 0 ends by sending the gradient of its input to stage
s - 1 (`messages`). Every message is one micro-batch's activation or
gradient, so each boundary carries 2·m of them per step: p2p_bytes_per_step.

Pure Python (the grader imports it while it plans, before torch is loaded).
"""
from __future__ import annotations

Step = tuple[str, int]          # ("F" | "B", micro-batch)


def warmup_forwards(stage: int, num_stages: int, num_microbatches: int) -> int:
    """Forwards stage `stage` runs before its first backward, beyond the first steady-state one."""
    if not 0 <= stage < num_stages or num_microbatches < 1:
        raise ValueError(f"stage {stage} of {num_stages} with {num_microbatches} micro-batches")
    return min(num_stages - stage - 1, num_microbatches)


def one_f_one_b(stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
    """The stage's forwards and backwards in 1F1B order."""
    m, w = num_microbatches, warmup_forwards(stage, num_stages, num_microbatches)
    order = [("F", i) for i in range(w)]                       # warm-up
    for i in range(m - w):                                     # steady state: forward i + w, backward i
        order += [("F", i + w), ("B", i)]
    order += [("B", i) for i in range(m - w, m)]               # cool-down
    return order


def gpipe(stage: int, num_stages: int, num_microbatches: int) -> list[Step]:
    """All forwards, then all backwards (GPipe's order, "afab")."""
    warmup_forwards(stage, num_stages, num_microbatches)        # the same checks
    return [("F", i) for i in range(num_microbatches)] + [("B", i) for i in range(num_microbatches)]


def letters(order: list[Step]) -> str:
    """"FFBFB...": the order as the grader reads it off a traced run."""
    return "".join(kind for kind, _ in order)


def peak_in_flight(order: list[Step]) -> int:
    """The most micro-batches forwarded and not yet backwarded at once."""
    peak = held = 0
    for kind, _ in order:
        held += 1 if kind == "F" else -1
        peak = max(peak, held)
    return peak


def messages(stage: int, num_stages: int, order: list[Step]) -> list[tuple[str, int, int]]:
    """The stage's point-to-point messages for `order`, in order: (kind, peer, micro-batch)."""
    s, last, out = stage, num_stages - 1, []
    for kind, i in order:
        if kind == "F":
            out += [("recv", s - 1, i)] if s > 0 else []
            out += [("send", s + 1, i)] if s < last else []
        else:
            out += [("recv", s + 1, i)] if s < last else []
            out += [("send", s - 1, i)] if s > 0 else []
    return out
