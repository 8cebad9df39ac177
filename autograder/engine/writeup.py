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
import re
import stat
from pathlib import Path

from shardlab.autograder.core.results import points_text
from shardlab.autograder.questions import part_points, questions

WRITEUP_FILE = "writeup.md"
MAX_WRITEUP_BYTES = 256 * 1024
PLACEHOLDER = "(your answer here)"
_HEADING = re.compile(r"^## +(\S+)[^\n]*$", re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)


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
    """{part id: answer text} from the submission's writeup.md (prompts and the
    placeholder removed); None when there is no readable plain file."""
    path = Path(root) / WRITEUP_FILE
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    with open(path, "rb") as f:
        text = f.read(MAX_WRITEUP_BYTES).decode("utf-8", "replace")
    marks = list(_HEADING.finditer(text))
    sections: dict[str, str] = {}
    for k, mark in enumerate(marks):
        body = text[mark.end():marks[k + 1].start() if k + 1 < len(marks) else len(text)]
        body = _COMMENT.sub("", body).replace(PLACEHOLDER, "").strip()
        sections.setdefault(mark.group(1), body)
    return sections


def word_count(text: str) -> int:
    return len(text.split())


def written_feedback(part_id: str, sections: dict[str, str] | None, points: float | None = None) -> str:
    """A manual part's feedback: answered (with its word count) or missing, and why; with `points`
    (the part's in this course), the graders' points it is worth, or that it is not graded."""
    head = ("Graded by hand." if points is None else
            f"Graded by hand ({points_label(points).split(',')[0]})." if points else
            "Not graded (a place for your answer only).")
    if sections is None:
        return f"{head} Missing: the submission has no {WRITEUP_FILE} beside assignments/."
    text = sections.get(part_id)
    if text is None:
        return f"{head} Missing: {WRITEUP_FILE} has no section '## {part_id}'."
    if not text:
        return f"{head} Missing: the section '## {part_id}' of {WRITEUP_FILE} is empty."
    return f"{head} Answered in {WRITEUP_FILE} ({word_count(text)} words)."
