"""`shardlab build`'s documents: the handout (Markdown, HTML, notebook), the
solutions with their figures, and the starter kit, rendered from the Jinja
templates (`jinja`) with the reference's worked derivations."""
from __future__ import annotations

from pathlib import Path

import jinja2

from shardlab.autograder.publish.diagrams import document_figures
from shardlab.autograder.publish.figures import MEMORY_PNG, memory_breakdown_png
from shardlab.autograder.publish.formats import notebook_json, to_html
from shardlab.autograder.publish.jinja import environment, own_template_error
from shardlab.autograder.publish.starter import build_starter_kit, public_checks
from shardlab.autograder.questions import is_own, part_points, questions

BUCKETS_PNG = "bench/buckets.png"   # where `shardlab bench buckets` writes its plot by default


def context(cfg, solutions: bool, figures: dict | None = None, student: dict | None = None) -> dict:
    """figures: solutions' image paths by name (None: not drawn); student:
    {id, name, answers} for a per-student handout (`roster`)."""
    qs = []
    for q in questions(cfg):
        sentence = q.degenerate(cfg) if q.degenerate else None
        qs.append(dict(
            number=q.number, title=q.title, module=q.module, template=f"questions/{q.template}", own=is_own(q),
            worked=q.worked(cfg) if q.worked else {},
            # what this course's numbers make of a degenerate sub-question (`questions.degeneracies`), with
            # derived numbers: only the solutions print it; a handout only asks why the sub-question is
            # degenerate (`is_degenerate`, or the worked values, say which is)
            degenerate=sentence if solutions else None,
            is_degenerate=bool(sentence),
            parts=[dict(id=p.id, title=p.title, points=part_points(p, cfg), kind=p.kind,
                        description=p.description,
                        mistakes=[m.message for m in p.for_course(cfg).misconceptions]) for p in q.parts],
            # the autograder's points, then the graders' (the written parts, `questions.hand_graded`)
            points=sum(part_points(p, cfg) for p in q.parts if p.kind == "auto" and not p.bonus),
            bonus=sum(part_points(p, cfg) for p in q.parts if p.kind == "auto" and p.bonus),
            written=sum(part_points(p, cfg) for p in q.parts if p.kind == "manual"),
        ))
    diagrams = document_figures(cfg, solutions)

    def figure(name: str) -> str:
        """A diagram's Markdown image (`diagrams`); empty when this document has none of that name."""
        if name not in diagrams:
            return ""
        path, alt, _ = diagrams[name]
        return f"![{alt}]({path})"
    # a course that sets some of the bank's questions keeps their numbers (so Task 4.1 is question 4's
    # everywhere: stubs, tests, feedback, Gradescope); the conventions say so when numbers are skipped
    bank = len(questions(None))
    return dict(cfg=cfg, questions=qs, solutions=solutions, figures=figures or {}, student=student, figure=figure,
                bank_size=bank)


def write_figures(cfg, out: Path, solutions: bool) -> list[Path]:
    """The document's diagrams next to it: out/figures/*.png for the handout, out/solutions-figures/*.png
    for the solutions (`diagrams.figure_file`)."""
    written = []
    for path, _, png in document_figures(cfg, solutions).values():
        (out / path).parent.mkdir(parents=True, exist_ok=True)
        (out / path).write_bytes(png)
        written.append(out / path)
    return written


def render_markdown(cfg, solutions: bool, figures: dict | None = None, student: dict | None = None) -> str:
    name = "solutions.md.j2" if solutions else "handout.md.j2"
    values = context(cfg, solutions, figures, student)
    try:
        return environment().get_template(name).render(**values)
    except jinja2.TemplateError as exc:         # in a course's own template: one line naming it
        own = own_template_error(exc)
        if own is None:
            raise
        raise own from None


def write_handout(cfg, out: Path, student: dict | None = None) -> list[Path]:
    """handout.md and handout.html (a per-student one with `student`)."""
    out.mkdir(parents=True, exist_ok=True)
    md = render_markdown(cfg, False, student=student)
    (out / "handout.md").write_text(md, encoding="utf-8")
    (out / "handout.html").write_text(to_html(md, cfg.course.assignment), encoding="utf-8")
    return [out / "handout.md", out / "handout.html", *write_figures(cfg, out, False)]


def build(cfg, out: Path) -> list[Path]:
    """Pipeline: handout (md, html, notebook), solutions with figures (md,
    html), starter kit zip. The bucket plot is linked when `shardlab bench
    buckets` already wrote it into out/bench/."""
    written = write_handout(cfg, out)
    md = written[0].read_text(encoding="utf-8")
    (out / "handout.ipynb").write_text(notebook_json(cfg, md, public_checks(cfg)), encoding="utf-8")
    written.append(out / "handout.ipynb")
    figures = {"memory": memory_breakdown_png(cfg, out / MEMORY_PNG).name,
               "buckets": BUCKETS_PNG if (out / BUCKETS_PNG).is_file() else None}
    solutions = render_markdown(cfg, True, figures)
    (out / "solutions.md").write_text(solutions, encoding="utf-8")
    (out / "solutions.html").write_text(to_html(solutions, f"{cfg.course.assignment}: solutions"),
                                        encoding="utf-8")
    written += [out / "solutions.md", out / "solutions.html", out / MEMORY_PNG, *write_figures(cfg, out, True)]
    written.append(build_starter_kit(cfg, md, out))
    return written
