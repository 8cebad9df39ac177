"""Question 4: the student's BucketedDDP (scenario "ddp_train").

A rank's value: {"state", "steps": [{"all_reduces": [[bytes, grads_before, async], ...],
"other": [ops], "grads": gradients produced}, ...]}.
"""
from __future__ import annotations

from ..rank_comparison import StepCheck


def check_bucket_bytes(expected: list[int], step: dict) -> str | None:
    """expected: the sorted byte sizes of the buckets of assign_buckets."""
    if step.get("other"):
        return f"unexpected collectives during the step: {', '.join(step['other'])}"
    got = sorted(ar[0] for ar in step["all_reduces"])
    if got == expected:
        return None
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


DDP_BUCKET_BYTES = StepCheck(check_bucket_bytes)
DDP_OVERLAP = StepCheck(check_overlap)
