"""Timelines: one traced training step drawn against what it should look like.

A part that is drawn says so in its definition (`Part.drawn`, a `Drawn`):
the files' stem, the step kept and the kind of drawing. There are two kinds:

- "overlap" (`overlap`): each rank's compute against its collectives; for
  DDP an all-reduce that starts before the last gradient is produced
  overlaps backward, for FSDP an all-gather issued during the previous
  unit's forward is a prefetch;
- "pipeline" (`pipeline`): each stage's forwards and backwards in the
  order its messages went out, beside 1F1B's order.

The same drawing is made in two places, from the same run of the part's
first public case:

- in grading, `drawing.timeline` keeps the traced step of the graded run on the
  part's result (plain JSON, never scored: a student can distort their own
  picture, never a grade) and the batch front end draws it;
- in the starter kit, `drawing.draw_timelines` runs the public run on local gloo
  ranks and draws it (`python tests/timelines.py` in the kit's folder
  writes timelines/; the .trace.json opens in https://ui.perfetto.dev).
"""
from __future__ import annotations

from typing import NamedTuple


class Drawn(NamedTuple):
    """How a part's run is drawn (`Part.drawn`)."""

    stem: str         # the files' name: <stem>.png, <stem>.trace.json
    step: str         # the step drawn: a DDP or pipeline phase ("step 2") or an FSDP step index ("1")
    kind: str         # "overlap" (`overlap`) or "pipeline" (`pipeline`)
