"""The written answers, writeup.md: one section per hand-graded part (the
`kind="manual"` parts of questions/: the one-sentence responses and the
free response), handed in beside assignments/.

    ## 1.a (a) written: one device's worth (2 points, graded by hand)
    <!-- the prompt, as a comment -->
    Your answer ...

The starter kit ships it with every heading (with the part's points for the
graders, `questions.part_points`) and prompt (`writeup_template`); the
notebook's "Written" cells save into the same file only what the student
typed in them, never over an answer already there (`publish.formats`).
Grading does not score it:
each manual part's feedback says whether its section holds an answer and how
many words (`written_feedback`), a batch collects every student's answer to
one part into one file for the graders (`platforms.batch`), and on
Gradescope each question's output carries the text (`platforms.otter`).
The file is the student's: it is read as plain text with a size cap, never
followed through a link, and shown only through `sandbox.untrusted`.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from shardlab.autograder.core.results import points_text
from shardlab.autograder.kit.writeup_check import (PLACEHOLDER, WRITEUP_FILE, answer_of,
                                                   section_problem, sections_of)
from shardlab.autograder.questions import part_points, questions

MAX_WRITEUP_BYTES = 256 * 1024


def written_parts(cfg=None) -> list:
    """Every hand-graded part of the course's questions (all questions without a config), in handout order."""
    return [p for q in questions(cfg) for p in q.parts if p.kind == "manual"]


def points_label(points: float) -> str:
    """How a written part's points read in its writeup.md heading and the notebook: "2 points, graded
    by hand", or "not graded" (0 points: a place for the answer only)."""
    if not points:
        return "not graded"
    return f"{points_text(points)} point{'' if points == 1 else 's'}, graded by hand"


def writeup_template(cfg=None) -> str:
    """The blank writeup.md of the starter kit: one section per written part, its heading
    giving the part's points in this course (its default points without a config)."""
    lines = ["# Written answers", "",
             "One section per written deliverable of the handout. Keep each `## <task id>` heading as it is",
             "and write your answer (calculations, then your sentence or paragraph) under it, in Markdown,",
             "in place of the placeholder. Hand this file in beside `assignments/`; graders read it and give",
             "each section the points its heading says, the autograder only checks that every section has an",
             "answer. The notebook's \"Written\" cells save into this file only what you type in them, and",
             "never over an answer already here.", ""]
    for part in written_parts(cfg):
        points = part_points(part, cfg) if cfg is not None else float(part.points)
        lines += [f"## {part.id} {part.title} ({points_label(points)})", "", f"<!-- {part.description} -->", "",
                  PLACEHOLDER, ""]
    return "\n".join(lines)


def read_writeup(root: Path) -> dict[str, str] | None:
    """{part id: section text} from the submission's writeup.md (comments and the
    placeholder removed: `kit.writeup_check.sections_of`); None when there is no
    readable plain file."""
    path = Path(root) / WRITEUP_FILE
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    with open(path, "rb") as f:
        return sections_of(f.read(MAX_WRITEUP_BYTES).decode("utf-8", "replace"))


def writeup_prompts(cfg=None) -> dict[str, str]:
    """{task id: its prompt} of every written part, in handout order: what the kit's pytest checks
    writeup.md against (tests/writeup_sections.json) and the grader's feedback with."""
    return {part.id: part.description for part in written_parts(cfg)}


def word_count(text: str) -> int:
    return len(text.split())


def written_feedback(part_id: str, sections: dict[str, str] | None, points: float | None = None,
                     prompt: str = "", task_ids: tuple[str, ...] = ()) -> str:
    """A manual part's feedback: answered (with its word count) or missing, and why, in the
    kit's words (`kit.writeup_check.section_problem`: a section of only TODO, TBD or the
    template's prompt is empty); with `points` (the part's in this course), the graders'
    points it is worth, or that it is not graded."""
    head = ("Graded by hand." if points is None else
            f"Graded by hand ({points_label(points).split(',')[0]})." if points else
            "Not graded (a place for your answer only).")
    problem = section_problem(part_id, sections, prompt, task_ids)
    if problem is not None:
        return f"{head} Missing: {problem}."
    assert sections is not None        # section_problem said so
    return f"{head} Answered in {WRITEUP_FILE} ({word_count(answer_of(sections[part_id], prompt))} words)."
