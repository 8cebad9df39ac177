"""The reference's plain-text formulas as LaTeX (publish/mathtext.py), checked
on the notation the reference uses, and every formula of the answer key
converts to MathML without falling back to code."""
from __future__ import annotations

import pytest

from shardlab.autograder.publish.formats import mathml
from shardlab.autograder.publish.mathtext import to_tex
from shardlab.autograder.questions import answer_key

pytestmark = pytest.mark.pure


@pytest.mark.parametrize("plain, tex", [
    ("P = 2 · D · F · L", r"P = 2 \cdot D \cdot F \cdot L"),
    ("n_b* = sqrt(s / (w · o))", r"n_{b}^* = \sqrt{s / (w \cdot o)}"),
    ("2 ** ((2T/C − b/β) · P_unit / α)", r"2 ^{(2T/C - b/β) \cdot P_{\text{unit}} / α}"),
    ("ceil(16P / 80 GB)", r"\left\lceil 16P / 80 \ \text{GB}\right\rceil"),
    ("16 · P + activations", r"16 \cdot P + \ \text{activations}"),
])
def test_the_reference_notation_becomes_latex(plain, tex):
    assert to_tex(plain) == tex


def test_every_answer_key_formula_typesets(cfg):
    for items in answer_key(cfg).values():
        for w in items.values():
            out = mathml(to_tex(w.formula), {})
            assert out.startswith("<math"), (w.formula, out)
