"""Question 4: the student's BucketedDDP (scenario "ddp_train").

A rank's value: {"state", "grads": per step {name: .grad after finish_gradient_synchronization()},
"steps": [{"all_reduces": [[bytes, grads_before, async, inside finish], ...], "other": [ops],
"grads": gradients produced, "grad_order": trainable parameter indices in the order their
gradients were produced}, ...], "broadcasts": broadcasts in the whole run,
"construction_collectives": collectives while BucketedDDP was constructed, "layout_bytes" and
"layout": the sorted byte sizes of the buckets of the student's own assign_buckets for the run's
model and cap, and those buckets (None when it gave no layout of the model's trainable parameters)}.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..rank_comparison import StatesMatch, StepCheck, constant_factor, excess, factor_text, per_rank_values


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


def _followed(expected: dict, step: dict, layout) -> list[list[int]] | None:
    """The layout the step's all-reduces follow, bucket for bucket by byte size: the student's own
    (`layout`, what their BucketedDDP is asked to use) or the reference's, else None."""
    sizes = expected["param_bytes"]
    got = sorted(ar[0] for ar in step["all_reduces"])
    for buckets in (layout, expected["layout"]):
        if isinstance(buckets, list) and got == sorted(sum(sizes[i] for i in b) for b in buckets):
            return buckets
    return None


def check_overlap(expected: dict, step: dict, layout=None) -> str | None:
    """expected: {"layout": the reference's buckets, "param_bytes": each trainable parameter's bytes};
    `layout`: the student's own buckets. Some all-reduce started, async, before backward produced its
    last gradient; and where the all-reduces follow a layout (Task 4.6), each bucket's started as soon
    as the bucket was complete (docs/spec.md, question 4): before backward produced any gradient after
    the bucket's last one, never inside finish_gradient_synchronization()."""
    in_backward = [ar for ar in step["all_reduces"] if not (len(ar) > 3 and ar[3])]
    early = [ar for ar in in_backward if ar[1] < step["grads"]]
    if not any(ar[2] for ar in early):
        if early:
            return "the all-reduces started during backward are blocking (use async_op=True)"
        return ("no all-reduce started before the backward pass produced its last gradient: launch "
                "each bucket's all-reduce from the gradient hooks as soon as the bucket is complete")
    buckets = _followed(expected, step, layout)
    if buckets is None:
        return None                 # Task 4.6 takes the points of all-reduces that follow no layout
    position = {param: k for k, param in enumerate(step.get("grad_order") or [], start=1)}
    last = len(position)
    ready = sorted((max(position.get(i, last) for i in b), sum(expected["param_bytes"][i] for i in b))
                   for b in buckets)
    issued = sorted(ar[1] for ar in in_backward)
    for j, (k, size) in enumerate(ready):
        if j >= len(issued) or issued[j] > k:
            when = (f"after gradient {issued[j]}" if j < len(issued)
                    else "inside finish_gradient_synchronization()")
            return (f"the bucket of {size} bytes was complete with gradient {k} of {last}, but its "
                    f"all-reduce started only {when}: start each bucket's all-reduce from the hook of its "
                    f"last gradient, before backward produces the next one")
    return None


@dataclass(frozen=True)
class TrainsLikeOneProcess:
    """Task 4.5's promise, step by step: right after finish_gradient_synchronization()
    every trainable parameter's .grad on every rank is the one-process gradient of
    the mean loss over the whole batch (expected["grads"], per step, by name), and
    the final state is single-process training's (expected["state"], `StatesMatch`).
    expected["buffers"] names the model's buffers: one that rank 0 holds right and
    another rank does not was never broadcast (the ranks start apart). Gradients
    all off by one factor are said as that factor; no optimizer hides it."""

    states: StatesMatch = field(default_factory=StatesMatch)

    def problem(self, expected, got) -> str | None:
        ranks = per_rank_values(got, None)
        if isinstance(ranks, str):
            return ranks
        return (self._buffers(expected, ranks) or self._gradients(expected["grads"], ranks)
                or self.states.problem(expected["state"], got))

    def _excess(self, want, value) -> float:
        return excess(want, value, self.states.atol, self.states.rtol)

    def _buffers(self, expected: dict, ranks: list) -> str | None:
        want = expected["state"]
        found = [(self._excess(want[name], v["state"][name]), r, name) for r, v in enumerate(ranks)
                 for name in expected.get("buffers", ()) if isinstance(v.get("state"), dict) and name in v["state"]]
        amount, r, name = max(found, default=(0.0, 0, ""), key=lambda w: w[0])
        if amount <= 0 or any(w[0] > 0 for w in found if w[1] == 0):
            return None
        return (f"rank {r}: buffer {name!r} differs from rank 0's by up to {amount:.2g}: rank 0's buffers "
                f"were not broadcast, so the ranks run different models; broadcast rank 0's buffers in "
                f"__init__ as well as its parameters")

    def _gradients(self, steps: list[dict], ranks: list) -> str | None:
        for k, want in enumerate(steps, start=1):
            pairs, worst = [], (0.0, 0, "")
            for r, value in enumerate(ranks):
                got = value.get("grads")
                have = got[k - 1] if isinstance(got, list) and len(got) >= k and isinstance(got[k - 1], dict) else {}
                for name, grad in want.items():
                    if have.get(name) is None:
                        return (f"step {k}: rank {r}'s {name!r} has no .grad after "
                                f"finish_gradient_synchronization()")
                    pairs.append((grad, have[name]))
                    worst = max(worst, (self._excess(grad, have[name]), r, name), key=lambda w: w[0])
            if worst[0] > 0:
                return self._wrong_step(k, pairs, worst, len(ranks))
        return None

    def _wrong_step(self, k: int, pairs: list, worst: tuple, world_size: int) -> str:
        c = constant_factor(pairs, self.states.atol, self.states.rtol)
        if c is None:
            amount, r, name = worst
            return (f"step {k}: rank {r}'s {name!r}.grad after finish_gradient_synchronization() differs "
                    f"from the one-process gradient of the mean loss over the whole batch by up to "
                    f"{amount:.2g} beyond the tolerance")
        both = (" (2 is also the world size: gradients summed over the ranks instead of averaged, or each "
                "gradient accumulated twice, give this)" if round(c, 3) == 2 == world_size else "")
        return (f"step {k}: your synchronized gradients are {factor_text(c)}x the expected ones (every "
                f"trainable parameter's .grad after finish_gradient_synchronization()){both}")

    def __call__(self, expected, got) -> bool:
        return self.problem(expected, got) is None


@dataclass(frozen=True)
class StartsFromRankZero:
    """`TrainsLikeOneProcess`; when it fails and a rank performed no broadcast in
    the whole run and no collective while BucketedDDP was constructed, the
    feedback names that cause: the ranks start from different initial weights
    (the scenario draws each rank its own), so only a broadcast of rank 0's
    state makes them one model."""

    trains: TrainsLikeOneProcess = field(default_factory=TrainsLikeOneProcess)

    def problem(self, expected, got) -> str | None:
        why = self.trains.problem(expected, got)
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
# started during backward, async, each bucket's as soon as it is complete (`check_overlap`)
DDP_OVERLAP = StepCheck(check_overlap, context="layout")
