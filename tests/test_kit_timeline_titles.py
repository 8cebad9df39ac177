"""No figure's title is clipped (issue 28): a timeline's long title (a
public run's whole call) and subtitle shrink, then wrap, and the head grows
to hold them (kit/timelines/overlap.py `fitted`, `draw`; pipeline.py
`draw_traced`); any figure's titles and texts are fitted between its edges
before it is saved (`fit_texts`: the handout's and solutions' diagrams,
publish/diagrams.py). Checked on the drawn figure: each text's window extent
after `canvas.draw()` lies within the figure's."""
import matplotlib
import pytest

from shardlab.autograder.core.drawing import Diagram
from shardlab.autograder.kit.timelines.overlap import SMALLEST, draw, fit_texts, fitted, step_window, text_width
from shardlab.autograder.kit.timelines.pipeline import draw_traced
from shardlab.autograder.publish import diagrams

pytestmark = pytest.mark.pure

matplotlib.use("Agg")

CALL = ("ddp_train(world_size=2, model='frozen_mlp', bucket_size_mb=9.5367431640625e-07, optimizer='adamw', "
        "steps=3, seed=125, note='a public case of a course whose calls take many more arguments than ours'), "
        "step 2")


def _outside(fig) -> list[str]:
    """The titles and texts drawn (the figure's, and each axes' titles and texts) whose extent
    leaves the figure."""
    from matplotlib.text import Text
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    renderer, box = canvas.get_renderer(), fig.bbox
    out = []
    for t in list(fig.texts) + [c for ax in fig.axes for c in ax.get_children() if isinstance(c, Text)]:
        if t.get_visible() and t.get_text().strip():
            e = t.get_window_extent(renderer)
            if e.x0 < box.x0 - 0.5 or e.x1 > box.x1 + 0.5 or e.y0 < box.y0 - 0.5 or e.y1 > box.y1 + 0.5:
                out.append(f"{t.get_text()[:60]!r}: {e}")
    return out


def _words(text: str) -> str:
    return "".join(text.split())


def _ddp_step() -> list[list[dict]]:
    def rank(shift: float) -> list[dict]:
        t = 100.0 + shift
        return [{"kind": "phase", "name": "step 2", "t": t},
                {"kind": "grad", "param": 0, "phase": "step 2", "t": t + 0.002},
                {"kind": "collective", "op": "all_reduce", "seq": 1, "bytes": 96, "async": True, "phase": "step 2",
                 "start": t + 0.0021, "end": t + 0.003},
                {"kind": "phase", "name": "step 3", "t": t + 0.004}]
    return step_window([rank(0.0), rank(0.0005)], "step 2")


def test_a_timeline_s_long_title_wraps_inside_the_figure(tmp_path):
    subtitle = "rank 0: " + "the first all-reduce started before backward ended, " * 4 + "\nrank 1: as rank 0"
    fig = draw(_ddp_step(), tmp_path / "t.png", CALL, subtitle)
    assert not _outside(fig)
    title, sub = fig.texts[:2]
    assert title.get_text().count("\n") >= 1 and _words(title.get_text()) == _words(CALL)     # wrapped, all of it
    assert _words(sub.get_text()) == _words(subtitle)
    assert title.get_window_extent().y0 > sub.get_window_extent().y1          # the subtitle moved down below it


def test_a_pipeline_timeline_s_long_title_wraps_inside_the_figure(tmp_path):
    title = CALL.replace("ddp_train", "pipeline_train")
    fig = draw_traced([[], []], ["FFBFBFBB", "FBFBFBFB"], tmp_path / "p.png", title)
    assert not _outside(fig)
    assert fig.texts[0].get_text().count("\n") >= 1


def test_fitted_keeps_shrinks_then_wraps():
    assert fitted("short", 500, 10) == ("short", 10)
    wide = text_width("x" * 100, 10)
    text, size = fitted("x" * 100, wide * 0.9, 10)                 # a little too wide: smaller, one line
    assert text == "x" * 100 and SMALLEST * 10 <= size < 10 and text_width(text, size) <= wide * 0.9
    text, size = fitted("word " * 60, 200, 10)                     # far too wide: the smallest size, wrapped
    assert size == SMALLEST * 10 and text.count("\n") > 2 and text_width(text, size) <= 200
    text, _ = fitted("y" * 400, 100, 10)                           # one word wider than a line is cut
    assert text.replace("\n", "") == "y" * 400 and text_width(text, SMALLEST * 10) <= 100


def test_any_figure_s_titles_are_fitted():
    from matplotlib.figure import Figure
    fig = Figure(figsize=(6, 6), dpi=100)
    for ax, loc in zip(fig.subplots(3, 1), ("left", "center", "right")):
        ax.set_title(f"a title on the {loc}, far too long for a six-inch figure, " * 2, loc=loc)
    fig.suptitle("and a figure title that is longer still than the axes titles are, " * 2)
    assert len(_outside(fig)) == 4
    fit_texts(fig)
    assert not _outside(fig)


def test_the_handout_s_diagrams_are_fitted_before_saving(monkeypatch, cfg):
    from matplotlib.figure import Figure
    drawn = []

    def long_titled(course, to_scale):
        fig = Figure(figsize=(5, 3), dpi=110)
        title = "s = 1,234,567,890,123 bytes in 4,096 buckets, w = 1.0e11 bytes/s, o = 50 µs"
        fig.subplots().set_title(title, loc="left")
        drawn.append(fig)
        return fig
    monkeypatch.setitem(diagrams.DIAGRAMS, "long_titled", Diagram("long_titled", None, str, long_titled))
    assert diagrams.diagram_png(cfg, "long_titled", True).startswith(b"\x89PNG")
    assert drawn and not _outside(drawn[0])
