"""The handout's teaching figures, collected from the questions: each
question lists its `Diagram`s (`Question.figures`, drawn with `core.drawing`),
each in two versions, schematic for students, to scale for the solutions.

Templates place a figure with `{{ figure("name") }}` (`render.context`);
the students' files go to `figures/`, the solutions' to
`solutions-figures/`, so the folder beside a handout never holds an answer;
the notebook embeds the same PNG bytes as cell attachments
(`formats`).
"""
from __future__ import annotations

import io
from functools import lru_cache

from shardlab.autograder.core.drawing import Diagram, pyplot
from shardlab.autograder.kit.timelines.overlap import fit_texts
from shardlab.autograder.questions import questions, registered

DIAGRAMS: dict[str, Diagram] = {d.name: d for q in registered() for d in q.figures}
"""Every question's figures, by name (names are unique across questions)."""


def diagram_png(cfg, name: str, to_scale: bool) -> bytes:
    """The PNG bytes of a diagram: to scale, drawn once per config; schematic, once (it takes nothing
    from the config, so every student's handout of a roster shares it)."""
    return _png(cfg if to_scale else None, name, to_scale)


@lru_cache(maxsize=64)
def _png(cfg, name: str, to_scale: bool) -> bytes:
    plt = pyplot()
    # or a course's own question's: its folder was loaded after this module (`questions.own_questions`)
    diagram = DIAGRAMS.get(name) or next(d for q in registered() for d in q.figures if d.name == name)
    fig = diagram.draw(cfg, to_scale)
    fit_texts(fig)          # a course's long numbers never push a title past the figure's edge
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})     # one draw: the margins are set by hand
    plt.close(fig)
    return buf.getvalue()


def figure_file(name: str, solutions: bool) -> str:
    """Where a document finds its figure, relative to the document: the solutions' in a folder of
    their own, so that `figures/` beside a handout holds nothing but the students' figures."""
    return f"{'solutions-figures' if solutions else 'figures'}/{name}.png"


def document_figures(cfg, solutions: bool) -> dict[str, tuple[str, str, bytes]]:
    """{name: (relative path, alt text, PNG bytes)} of one document's diagrams (the course's questions')."""
    out = {}
    for d in (d for q in questions(cfg) for d in q.figures):
        if solutions:
            out[d.name] = (figure_file(d.name, True), d.solutions_alt(cfg), diagram_png(cfg, d.name, True))
        elif d.student_alt:
            out[d.name] = (figure_file(d.name, False), d.student_alt, diagram_png(cfg, d.name, False))
    return out
