"""Handouts from Jinja templates. Templates compute nothing: every number
comes from the reference's worked derivations for the course config."""
from __future__ import annotations

from pathlib import Path

import jinja2

from autograder.questions import part_points, questions

TEMPLATES = Path(__file__).resolve().parents[1] / "templates"


def environment() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)


def context(cfg, solutions: bool) -> dict:
    qs = []
    for q in questions():
        qs.append(dict(
            number=q.number, title=q.title, module=q.module, template=f"questions/{q.template}",
            worked=q.worked(cfg) if q.worked else {},
            parts=[dict(id=p.id, title=p.title, points=part_points(p, cfg), kind=p.kind,
                        description=p.description,
                        mistakes=[m.message for m in p.misconceptions]) for p in q.parts],
            points=sum(part_points(p, cfg) for p in q.parts if not p.bonus),
            bonus=sum(part_points(p, cfg) for p in q.parts if p.bonus),
        ))
    return dict(cfg=cfg, questions=qs, solutions=solutions)


def render_markdown(cfg, solutions: bool) -> str:
    name = "solutions.md.j2" if solutions else "handout.md.j2"
    return environment().get_template(name).render(**context(cfg, solutions))


def build(cfg, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for solutions, name in ((False, "handout.md"), (True, "solutions.md")):
        path = out / name
        path.write_text(render_markdown(cfg, solutions), encoding="utf-8")
        written.append(path)
    return written
