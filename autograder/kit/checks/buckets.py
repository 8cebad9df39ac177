"""Question 4: the student's BucketedDDP (scenario "ddp_train").

A rank's value: {"state", "steps": [{"all_reduces": [[bytes, grads_before, async], ...],
"other": [ops], "grads": gradients produced}, ...], "broadcasts": broadcasts in the whole
run, "construction_collectives": collectives while BucketedDDP was constructed,
"layout_bytes": the sorted byte sizes of the buckets of the student's own assign_buckets for
the run's model and cap (None when it gave no layout of the model's trainable parameters)}.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..rank_comparison import StatesMatch, StepCheck


def check_bucket_bytes(expected: list[int], step: dict, layout: list[int] | None = None) -> str | None:
    """expected: the sorted byte sizes of the buckets of assign_buckets; `layout`, those of
    the student's own assign_buckets (which their BucketedDDP uses) when it differs: a
    layout mistake is task 4.1's, so all-reduces that follow either layout pass here."""
    if step.get("other"):
        return f"unexpected collectives during the step: {', '.join(step['other'])}"
    layout = layout if isinstance(layout, list) else None
    got = sorted(ar[0] for ar in step["all_reduces"])
    if got == expected or (layout is not None and got == layout):
        return None
    if layout is not None and layout != expected:
        return (f"{len(got)} all-reduce(s) of {got} bytes; expected one per bucket of the layout your "
                f"assign_buckets gives ({len(layout)}), of the bucket's byte size")
    return (f"{len(got)} all-reduce(s) of {got} bytes; expected one per bucket "
            f"({len(expected)}), of the bucket's byte size")


def check_overlap(expected: bool, step: dict) -> str | None:
    """Some all-reduce started, async, before backward produced its last gradient."""
    early = [ar for ar in step["all_reduces"] if ar[1] < step["grads"]]
    if any(ar[2] for ar in early):
        return None
    if early:
        return "the all-reduces started during backward are blocking (use async_op=True)"
    return ("no all-reduce started before the backward pass produced its last gradient: launch "
            "each bucket's all-reduce from the gradient hooks as soon as the bucket is complete")


@dataclass(frozen=True)
class StartsFromRankZero:
    """The final weights of single-process training (`StatesMatch`); when they differ and
    a rank performed no broadcast in the whole run and no collective while BucketedDDP was
    constructed, the feedback names that cause: the ranks start from different initial
    weights (the scenario draws each rank its own), so only a broadcast of rank 0's state
    makes them one model."""

    states: StatesMatch = field(default_factory=StatesMatch)

    def problem(self, expected, got) -> str | None:
        why = self.states.problem(expected, got)
        if why is None:
            return None
        silent = isinstance(got, list) and any(isinstance(v, dict) and v.get("broadcasts") == 0
                                               and v.get("construction_collectives") == 0 for v in got)
        if not silent:
            return why
        return ("no broadcast while BucketedDDP was constructed: every rank starts from its own initial "
                "weights, so the ranks train different models; broadcast rank 0's parameters and buffers "
                f"in __init__ ({why})")

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


DDP_TRAINS_LIKE_ONE_PROCESS = StartsFromRankZero()
# one all-reduce per bucket, of the reference's layout or of the rank's own (`check_bucket_bytes`)
DDP_BUCKET_BYTES = StepCheck(check_bucket_bytes, context="layout_bytes")
DDP_OVERLAP = StepCheck(check_overlap)
