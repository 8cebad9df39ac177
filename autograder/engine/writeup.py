"""The written answers, writeup.md: one section per hand-graded part (the
`kind="manual"` parts of questions/: the one-sentence responses and the
free response), handed in beside assignments/.

    ## 1.a (a) One device's worth: your calculation and one sentence
    <!-- the prompt, as a comment -->
    Your answer ...

The starter kit ships it with every heading and prompt (`writeup_template`);
the notebook's answer cells write the same file. Grading does not score it:
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

from shardlab.autograder.questions import questions

WRITEUP_FILE = "writeup.md"
MAX_WRITEUP_BYTES = 256 * 1024
PLACEHOLDER = "(your answer here)"
_HEADING = re.compile(r"^## +(\S+)[^\n]*$", re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)


def written_parts(cfg=None) -> list:
    """Every hand-graded part of the course's questions (all questions without a config), in handout order."""
    return [p for q in questions(cfg) for p in q.parts if p.kind == "manual"]


def writeup_template(cfg=None) -> str:
    """The blank writeup.md of the starter kit: one section per written part."""
    lines = ["# Written answers", "",
             "One section per written deliverable of the handout. Keep each `## <task id>` heading as it is",
             "and write your answer (calculations, then your sentence or paragraph) under it, in Markdown.",
             "Hand this file in beside `assignments/`; graders read it, the autograder only checks that",
             "every section has an answer.", ""]
    for part in written_parts(cfg):
        lines += [f"## {part.id} {part.title}", "", f"<!-- {part.description} -->", "", PLACEHOLDER, ""]
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


def written_feedback(part_id: str, sections: dict[str, str] | None) -> str:
    """A manual part's feedback: answered (with its word count) or missing, and why."""
    if sections is None:
        return f"Graded by hand. Missing: the submission has no {WRITEUP_FILE} beside assignments/."
    text = sections.get(part_id)
    if text is None:
        return f"Graded by hand. Missing: {WRITEUP_FILE} has no section '## {part_id}'."
    if not text:
        return f"Graded by hand. Missing: the section '## {part_id}' of {WRITEUP_FILE} is empty."
    return f"Graded by hand. Answered in {WRITEUP_FILE} ({word_count(text)} words)."
