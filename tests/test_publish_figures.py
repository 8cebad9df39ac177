"""The handout's teaching figures (publish/diagrams.py): schematic for students,
to scale for the solutions, in the md, html and notebook alike, with alt text.

Hand-derived checks: the FSDP schedule with forward 1 and all-gather 1.5
leaves a 0.5 gap before every forward after the first; the DDP schedule with
4 buckets, transfer 1 and overhead 0.25 leaves 4·0.25 + 1 = 2 after backward
(docs/spec.md: n_b·o + s/(n_b·w)); the overhead curve's optimum is where
d/dn_b (n_b·o + s/(n_b·w)) = o − s/(n_b²·w) = 0, n_b* = sqrt(s / (w·o)),
with the overhead 2·sqrt(s·o/w) there, worked out here from the config's s,
w and o, not by the reference functions the figure plots.
"""
from __future__ import annotations

import json
import math
import re
import struct
import zipfile

import pytest

from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.publish import diagrams
from shardlab.autograder.questions.buckets import figures as buckets_figures
from shardlab.autograder.questions.fsdp import figures as fsdp_figures
from shardlab.autograder.publish.formats import notebook_json, to_html
from shardlab.autograder.publish.render import build, render_markdown, write_handout
from shardlab.reference.config import replaced
from shardlab.autograder.publish.starter import kit_files, public_checks
from shardlab.autograder.questions import answer_key

pytestmark = pytest.mark.pure
PNG = b"\x89PNG\r\n\x1a\n"
STUDENT = ["fsdp_timeline", "mesh", "ddp_buckets", "pipeline_schedules"]
# the ordinals a schematic may print: units and buckets 1-4; the pipeline's stages 0-3 and micro-batches 0-7,
# and its schedule's name, 1F1B
ORDINALS = {"pipeline_schedules": r"\b[0-7]\b|\b1F1B\b"}
SOLUTIONS_ONLY = ["bucket_overhead"]


@pytest.fixture(scope="module", params=["course", "variant"])
def course(request, cfg):
    """The shipped course and one student's variant (other mesh, networks and bucket numbers)."""
    if request.param == "course":
        return cfg
    return variant_config(replaced(cfg, {"course.secret": "a long private course secret"}), "s001")


@pytest.fixture(autouse=True)
def close_drawn_figures():
    """The tests draw figures without saving them: close them after each test."""
    yield
    import matplotlib.pyplot as plt
    plt.close("all")


def _size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG)
    return struct.unpack(">II", png[16:24])


def _texts(fig) -> list[str]:
    """Every visible text the figure draws (tick labels included)."""
    from matplotlib.text import Text
    fig.draw_without_rendering()        # lays out and makes the tick labels, as a draw does, without the pixels
    return [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def test_the_fsdp_schedule_exposes_the_longer_gather():
    gathers, forwards, gaps = fsdp_figures.fsdp_schedule(1.0, 1.5)
    assert [s for s, _ in gathers] == [0, 1.5, 3.0, 4.5] and [s for s, _ in forwards] == [1.5, 3.0, 4.5, 6.0]
    assert gaps == [(2.5, 0.5), (4.0, 0.5), (5.5, 0.5)]
    assert fsdp_figures.fsdp_schedule(1.0, 0.6)[2] == []            # hidden: the forwards follow each other


def test_the_ddp_schedule_leaves_the_model_overhead_after_backward():
    compute, comms, end = buckets_figures.ddp_schedule(4, 1.0, 0.25)
    assert end == 4 and comms[0][0] == 1.0                      # the first all-reduce starts during backward
    assert comms[-1][0] + comms[-1][1] - end == pytest.approx(4 * 0.25 + 1)


def test_the_overhead_curve_marks_the_optimum_derived_by_hand(course):
    s, w, o = course.buckets.model_bytes, course.buckets.bandwidth, course.buckets.call_overhead_seconds
    n_star = math.sqrt(s / (w * o))                  # o − s/(n_b²·w) = 0
    least = n_star * o + s / (n_star * w)            # = 2·sqrt(s·o/w)
    assert least == pytest.approx(2 * math.sqrt(s * o / w))
    fig = diagrams.DIAGRAMS["bucket_overhead"].draw(course, True)
    ax = fig.axes[0]
    marker = next(line for line in ax.lines if line.get_gid() == "optimum")
    assert marker.get_xdata()[0] == pytest.approx(n_star, rel=1e-12)
    assert marker.get_ydata()[0] == pytest.approx(least, rel=1e-12)
    curve = ax.lines[0]                              # n_b·o + s/(n_b·w), sampled: never below the optimum
    assert min(curve.get_ydata()) >= least * (1 - 1e-12)
    assert min(curve.get_xdata()) <= n_star <= max(curve.get_xdata())
    assert f"{n_star:.2f} buckets" in marker.get_label()


@pytest.mark.parametrize("name", STUDENT + SOLUTIONS_ONLY)
def test_every_figure_renders(course, name):
    for to_scale in (False, True) if name in STUDENT else (True,):
        width, height = _size(diagrams.diagram_png(course, name, to_scale))
        assert 500 <= width <= 1400 and 200 <= height <= 900, (name, to_scale, width, height)
    if name in STUDENT:
        assert diagrams.diagram_png(course, name, True) != diagrams.diagram_png(course, name, False)


@pytest.mark.parametrize("name", STUDENT)
def test_the_students_figures_are_schematic(course, name):
    """No number a student could read off: no tick labels, no values; only the ordinals of the
    units, buckets, stages and micro-batches drawn (ORDINALS)."""
    ordinals = ORDINALS.get(name, r"\b[1-4]\b")
    fig = diagrams.DIAGRAMS[name].draw(course, False)
    for ax in fig.axes:
        assert not [t for t in ax.get_xticklabels() if t.get_text()]
    for text in _texts(fig):
        assert not re.search(r"\d", re.sub(ordinals, "", text)), text
    alt = diagrams.DIAGRAMS[name].student_alt
    assert not re.search(r"\d", re.sub(ORDINALS[name], "", alt) if name in ORDINALS else alt)   # 1F1B is a name
    assert any(re.search(r"\d", re.sub(ordinals, "", text))      # the check sees the solutions' numbers
               for text in _texts(diagrams.DIAGRAMS[name].draw(course, True)))
    # nothing in it comes from the config: it draws without one
    assert _texts(diagrams.DIAGRAMS[name].draw(None, False)) == _texts(fig)


def test_the_solutions_print_the_references_numbers(course):
    key = answer_key(course)
    fsdp, buckets = key["2"], key["4"]
    texts = "\n".join(_texts(diagrams.DIAGRAMS["fsdp_timeline"].draw(course, True)))
    assert fsdp["forward"].shown in texts and fsdp["allgather_inter"].shown in texts
    texts = "\n".join(_texts(diagrams.DIAGRAMS["bucket_overhead"].draw(course, True)))
    assert all(buckets[k].shown in texts for k in ("overhead_one", "n_opt", "b_opt", "overhead_opt"))
    alt = diagrams.DIAGRAMS["bucket_overhead"].solutions_alt(course)
    assert buckets["n_opt"].shown in alt and buckets["overhead_opt"].shown in alt
    texts = "\n".join(_texts(diagrams.DIAGRAMS["pipeline_schedules"].draw(course, True)))
    assert all(key["5"][k].shown in texts for k in ("step", "fraction", "act_gpipe_first", "act_1f1b_first"))
    volumes = key["3"].get("volumes")
    if volumes is not None:
        texts = "\n".join(_texts(diagrams.DIAGRAMS["mesh"].draw(course, True)))
        assert all(f"{v:,} bytes per chip" in texts for v in volumes.value.values())


def test_every_figure_is_in_every_student_format_with_its_alt_text(course):
    md = render_markdown(course, False)
    html = to_html(md, "handout")
    nb = json.loads(notebook_json(course, md, public_checks(course)))
    attached = {name: cell for cell in nb["cells"] for name in cell.get("attachments", {})}
    kit = kit_files(course, md)
    for name in STUDENT:
        alt = diagrams.DIAGRAMS[name].student_alt
        assert md.count(f"![{alt}](figures/{name}.png)") == 1
        assert f'src="figures/{name}.png" alt="{alt}"' in html
        cell = attached[f"{name}.png"]
        assert f"![{alt}](attachment:{name}.png)" in "".join(cell["source"])
        assert cell["attachments"][f"{name}.png"]["image/png"]       # the PNG travels in the notebook
        assert kit[f"figures/{name}.png"] == diagrams.diagram_png(course, name, False)
    assert kit["handout.html"] == html.replace("<title>handout</title>", f"<title>{course.assignment_name}</title>")
    for text in (md, html, json.dumps(nb), *[p for p in kit]):
        assert "solutions-figures" not in text and "bucket_overhead" not in text


def test_the_solutions_show_every_figure_to_scale_with_alt_text(course):
    md = render_markdown(course, True)
    html = to_html(md, "solutions")
    for name in STUDENT + SOLUTIONS_ONLY:
        alt = diagrams.DIAGRAMS[name].solutions_alt(course)
        assert md.count(f"![{alt}](solutions-figures/{name}.png)") == 1
        assert f'src="solutions-figures/{name}.png" alt="{alt}"' in html


def test_the_build_keeps_the_solutions_figures_out_of_the_students_folder(cfg, tmp_path):
    build(cfg, tmp_path)
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == sorted(f"{n}.png" for n in STUDENT)
    assert sorted(p.name for p in (tmp_path / "solutions-figures").iterdir()) == sorted(
        f"{n}.png" for n in STUDENT + SOLUTIONS_ONLY)
    for doc in ("handout.md", "handout.html"):
        linked = set(re.findall(r"figures/[\w-]+\.png", (tmp_path / doc).read_text()))
        assert linked == {f"figures/{n}.png" for n in STUDENT}, doc
    solutions = (tmp_path / "solutions.md").read_text()
    assert all((tmp_path / path).is_file() for path in re.findall(r"\]\(([\w/-]+\.png)\)", solutions))
    with zipfile.ZipFile(tmp_path / "starter-kit.zip") as zf:
        pngs = {n for n in zf.namelist() if n.endswith(".png")}
        assert pngs == {f"starter-kit/figures/{n}.png" for n in STUDENT}
        assert all(zf.read(f"starter-kit/figures/{n}.png") == (tmp_path / "figures" / f"{n}.png").read_bytes()
                   for n in STUDENT)


def test_a_students_own_handout_carries_the_figures(cfg, tmp_path):
    course = replaced(cfg, {"course.secret": "a long private course secret"})
    written = write_handout(variant_config(course, "s001"), tmp_path,
                            student=dict(id="s001", name="A Student", answers=""))
    assert sorted(p.name for p in written if p.suffix == ".png") == sorted(f"{n}.png" for n in STUDENT)
