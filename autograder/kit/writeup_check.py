"""Which sections of writeup.md hold an answer, in one rule and one set of
words for the grader (`engine.writeup`, each written part's feedback) and
the starter kit (its pytest's writeup lines, tests/conftest.py), which
ships this module.

writeup.md has one `## <task id>` section per written part. A section
counts as empty when nothing is left of it once these are taken out: HTML
comments (the template's prompt is one), the placeholder "(your answer
here)", the template's prompt if it was copied out of its comment, and
note lines, lines that begin with TODO or TBD ("TODO finish"): a note to
oneself is not an answer (docs/spec.md, "Written answers").
"""
from __future__ import annotations

import re

WRITEUP_FILE = "writeup.md"
PLACEHOLDER = "(your answer here)"
NOTE_MARKERS = ("TODO", "TBD")

_HEADING = re.compile(r"^## +(\S+)[^\n]*$", re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
# a line that is a note to oneself: TODO or TBD first (after a list or quote mark), any case
_NOTE_LINE = re.compile(r"^[ \t]*(?:[-*+>][ \t]*)?(?:" + "|".join(NOTE_MARKERS) + r")\b[^\n]*$", re.M | re.I)


def sections_of(text: str) -> dict[str, str]:
    """{task id: the section's text}, comments and the placeholder taken out; a repeated heading
    keeps its first section."""
    marks = list(_HEADING.finditer(text))
    sections: dict[str, str] = {}
    for k, mark in enumerate(marks):
        body = text[mark.end():marks[k + 1].start() if k + 1 < len(marks) else len(text)]
        sections.setdefault(mark.group(1), _COMMENT.sub("", body).replace(PLACEHOLDER, "").strip())
    return sections


def answer_of(section: str, prompt: str = "") -> str:
    """What of a section is an answer: its text without note lines (TODO, TBD) and without the
    template's prompt."""
    if prompt.strip():
        section = section.replace(prompt.strip(), "")
    return _NOTE_LINE.sub("", section).strip()


def section_problem(part_id: str, sections: dict[str, str] | None, prompt: str = "",
                    task_ids: tuple[str, ...] = ()) -> str | None:
    """Why the section of `part_id` holds no answer, in the words both the grader and the kit use,
    or None when it holds one. `sections`: `sections_of` the file, None when there is none;
    `task_ids`: every written part's, to name the headings a renamed section left behind."""
    if sections is None:
        return f"the submission has no {WRITEUP_FILE} beside assignments/"
    text = sections.get(part_id)
    if text is None:
        return f"{WRITEUP_FILE} has no section '## {part_id}'" + _renamed(sections, task_ids)
    if not text:
        return f"the section '## {part_id}' of {WRITEUP_FILE} is empty"
    if not answer_of(text, prompt):
        return (f"the section '## {part_id}' of {WRITEUP_FILE} holds only a placeholder (TODO, TBD or the "
                f"template's prompt), which counts as empty")
    return None


def _renamed(sections: dict[str, str], task_ids: tuple[str, ...]) -> str:
    """The headings that name no task, which a renamed section leaves behind."""
    odd = [name for name in sections if name not in task_ids]
    if not task_ids or not odd:
        return ""
    return (f" (keep each heading as the template has it: {', '.join(f'## {n}' for n in odd[:3])} "
            f"is no task id)")


def writeup_lines(text: str | None, prompts: dict[str, str]) -> list[str]:
    """One line per section of writeup.md that holds no answer (`prompts`: {task id: its prompt},
    in the handout's order); `text` None when there is no file."""
    sections = None if text is None else sections_of(text)
    if sections is None:
        return [section_problem("", None) or ""]
    ids = tuple(prompts)
    return [f"{part_id}: {problem}" for part_id, prompt in prompts.items()
            if (problem := section_problem(part_id, sections, prompt, ids)) is not None]
