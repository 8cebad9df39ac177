"""The handout's teaching figures (publish/diagrams.py): schematic for students,
to scale for the solutions, in the md, html and notebook alike, with alt text.

Hand-derived checks: the FSDP schedule with forward 1 and all-gather 1.5
leaves a 0.5 gap before every forward after the first; the DDP schedule with
4 buckets, transfer 1 and overhead 0.25 leaves 4·0.25 + 1 = 2 after backward
(docs/spec.md: n_b·o + s/(n_b·w)); the overhead curve's optimum is
sqrt(s / (w·o)) buckets.
"""
from __future__ import annotations

import json
import math

import pytest

from shardlab.autograder.publish import diagrams
from shardlab.autograder.publish.formats import notebook_json, to_html
from shardlab.autograder.publish.render import render_markdown
from shardlab.autograder.publish.starter import kit_files, public_checks

pytestmark = pytest.mark.pure
PNG = b"\x89PNG\r\n\x1a\n"
STUDENT = ["fsdp_timeline", "mesh", "ddp_buckets"]


def test_the_fsdp_schedule_exposes_the_longer_gather():
    gathers, forwards, gaps = diagrams._fsdp_schedule(1.0, 1.5)
    assert [s for s, _ in gathers] == [0, 1.5, 3.0, 4.5] and [s for s, _ in forwards] == [1.5, 3.0, 4.5, 6.0]
    assert gaps == [(2.5, 0.5), (4.0, 0.5), (5.5, 0.5)]
    assert diagrams._fsdp_schedule(1.0, 0.6)[2] == []            # hidden: the forwards follow each other


def test_the_ddp_schedule_leaves_the_model_overhead_after_backward():
    compute, comms, end = diagrams._ddp_schedule(4, 1.0, 0.25)
    assert end == 4 and comms[0][0] == 1.0                      # the first all-reduce starts during backward
    assert comms[-1][0] + comms[-1][1] - end == pytest.approx(4 * 0.25 + 1)


def test_the_overhead_curve_marks_the_optimum(cfg):
    b = cfg.buckets
    fig = diagrams.DIAGRAMS["bucket_overhead"].draw(cfg, True)
    marker = fig.axes[0].lines[-1]
    assert marker.get_xdata()[0] == pytest.approx(math.sqrt(b.model_bytes / (b.bandwidth * b.call_overhead)))


def test_every_figure_is_in_every_student_format_with_its_alt_text(cfg):
    md = render_markdown(cfg, False)
    html = to_html(md, "handout")
    nb = json.loads(notebook_json(cfg, md, public_checks(cfg)))
    attached = {name: cell for cell in nb["cells"] for name in cell.get("attachments", {})}
    kit = kit_files(cfg, md)
    for name in STUDENT:
        alt = diagrams.DIAGRAMS[name].student_alt
        assert f"![{alt}](figures/{name}.png)" in md
        assert f'alt="{alt}"' in html and f'src="figures/{name}.png"' in html
        assert f"![{alt}](attachment:{name}.png)" in "".join(attached[f"{name}.png"]["source"])
        assert kit[f"figures/{name}.png"].startswith(PNG)
    assert "bucket_overhead" not in md and "solutions-" not in md and not any("solutions-" in p for p in kit)


def test_the_solutions_draw_to_scale(cfg):
    md = render_markdown(cfg, True)
    for name in [*STUDENT, "bucket_overhead"]:
        assert f"(figures/solutions-{name}.png)" in md
        assert diagrams.diagram_png(cfg, name, True).startswith(PNG)
        assert diagrams.diagram_png(cfg, name, True) != (diagrams.diagram_png(cfg, name, False)
                                                          if name in STUDENT else b"")
