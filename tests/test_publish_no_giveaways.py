"""Nothing a student receives gives away what the solutions derive.

The solutions print every derivation (engine: the reference's `Worked`
items: formula, numbers substituted, result). The student material (the
handout in md, html and notebook, for the course and for two students'
variants, and every file of the starter kit: stubs, README, public cases,
writeup.md) must contain none of the derived expressions and none of the
derived numbers. Given numbers (the course config's) may appear; so may the
definitions the problem gives, listed below with the reason.
"""
from __future__ import annotations

import dataclasses
import json
import math
import numbers
import re

import pytest

from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.publish.formats import notebook_json, to_html
from shardlab.autograder.publish.render import render_markdown
from shardlab.autograder.publish.starter import kit_files, public_checks
from shardlab.autograder.questions import answer_key

pytestmark = pytest.mark.pure

# definitions the handout states on purpose (docs/spec.md): a unit's forward time, 2 FLOPs per
# parameter per token (Task 2.2's definition)
GIVEN_FORMULAS = {"2·t·p_unit/c"}


def _norm(text: str) -> str:
    text = text.lower().replace("**", "^").replace("*", "·").replace("−", "-").replace("×", "x")
    return re.sub(r"[\s`$\\{}]", "", text)


def _formulas(worked) -> set[str]:
    """Each derived expression, and each side of an equation in it."""
    out = set()
    for piece in re.split(r"[,;]| = |⇔", worked.formula):
        piece = _norm(piece)
        if len(piece) >= 6 and re.search(r"[-+/·^(]", piece) and piece not in GIVEN_FORMULAS:
            out.add(piece)
    return out


def _given_numbers(cfg) -> set[float]:
    found = set()

    def walk(x):
        if dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name))
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, numbers.Real) and not isinstance(x, bool):
            found.add(float(x))
    walk(cfg)
    return found


def _number_forms(value) -> set[str]:
    """How a derived number could be printed: an integer with or without
    separators; a real number's first 4 significant digits (more digits may
    follow: the same number, more precisely). Distinctive ones only."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        return set()
    if float(value).is_integer() and abs(value) < 1e15:
        forms = {f"{int(value):,}", str(int(value))}
    else:
        forms = {f"{value:.4g}".split("e")[0].rstrip("0").rstrip(".")}
    return {f for f in forms if len(re.sub(r"\D", "", f).lstrip("0")) >= 4}


def _derived(cfg) -> tuple[set[str], set[str]]:
    given = _given_numbers(cfg)
    formulas, numbers_ = set(), set()
    for items in answer_key(cfg).values():
        for w in items.values():
            formulas |= _formulas(w)
            if isinstance(w.value, numbers.Real) and float(w.value) not in given:
                numbers_ |= _number_forms(w.value)
    return formulas, numbers_


def _student_material(cfg, student=None) -> dict[str, str]:
    md = render_markdown(cfg, False, student=student)
    nb = json.loads(notebook_json(cfg, md, public_checks(cfg)))
    out = {"handout.md": md, "handout.html": to_html(md, cfg.assignment_name),
           "handout.ipynb": "\n".join("".join(c["source"]) for c in nb["cells"])}
    out.update({f"kit/{path}": text for path, text in kit_files(cfg, md).items()
                if path != "handout.ipynb" and isinstance(text, str)})     # figures: their alt text is in md
    return out


def _leaks(cfg, student=None) -> list[str]:
    formulas, numbers_ = _derived(cfg)
    leaks = []
    for name, text in _student_material(cfg, student).items():
        flat = _norm(text)
        leaks += [f"{name}: formula {f}" for f in sorted(formulas) if f in flat]
        leaks += [f"{name}: number {n}" for n in sorted(numbers_)
                  if re.search(rf"(?<![\d.,]){re.escape(n)}" + ("" if "." in n else r"(?![\d])"), text)]
    return leaks


def test_the_course_handout_and_kit_give_nothing_away(cfg):
    assert _leaks(cfg) == []


@pytest.mark.parametrize("student_id", ["s001", "ada@example.edu"])
def test_a_students_variant_gives_nothing_away(cfg, student_id):
    course = dataclasses.replace(cfg, secret="a long private course secret")
    variant = variant_config(course, student_id)
    assert _leaks(variant, dict(id=student_id, name="A Student", answers="")) == []


def test_the_check_would_see_a_leak(cfg, monkeypatch):
    """A handout that printed the derivations (as the student handout did before)
    or a public case with a derived value is flagged by the same scan."""
    formulas, numbers_ = _derived(cfg)
    assert formulas and numbers_
    key = answer_key(cfg)
    printed = "\n".join(f"- {w.quantity}: {w.formula} = {w.shown}" for items in key.values() for w in items.values())
    original = render_markdown
    monkeypatch.setitem(globals(), "render_markdown", lambda *a, **k: original(*a, **k) + printed)
    leaks = _leaks(cfg)
    assert sum(name.startswith("handout.md: formula") for name in leaks) == len(formulas)
    assert any(name.startswith("handout.md: number") for name in leaks)
