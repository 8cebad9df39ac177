"""The reference's plain-text formulas (`derivation.Worked`: "P = 2 · D · F · L",
"2 ** ((2T/C − b/β) · P_unit / α)", "n_b* = sqrt(s / (w · o))") as LaTeX, so the
solutions typeset them (`formats` turns `$...$` into MathML).

The notation is the reference's own, and small: `·`, `×`, `≥`, `⇔`, `⌈ ⌉`,
`sqrt(...)`, `ceil(...)`, `floor(...)`, `log2(...)`, `a ** b`, subscripts
`P_unit`, stars `n_b*`. Anything else passes through; a formula the MathML
converter cannot read stays readable as code (formats.mathml).
"""
from __future__ import annotations

import re

SYMBOLS = {"·": r" \cdot ", "×": r" \times ", "≥": r" \ge ", "≤": r" \le ", "⇔": r" \iff ", "−": "-",
           "≈": r" \approx ", "⌈": r"\lceil ", "⌉": r"\rceil ", "Σ": r"\sum ", "→": r" \to "}
FUNCTIONS = {"sqrt": (r"\sqrt{", "}"), "ceil": (r"\left\lceil ", r"\right\rceil "),
             "floor": (r"\left\lfloor ", r"\right\rfloor "), "log2": (r"\log_2\left(", r"\right)"),
             "max": (r"\max\left(", r"\right)")}
_NAME = re.compile(r"([A-Za-zα-ω])_([A-Za-z0-9]+)(\*?)")
_WORDS = re.compile(r"(?<![\\\w{])([A-Za-z]{2,}(?:\s+[A-Za-z]{2,})*)(?![\w{])")


def _closing(text: str, start: int) -> int:
    """Index of the parenthesis closing the one at `start`."""
    depth = 0
    for k in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[k], 0)
        if depth == 0:
            return k
    return len(text) - 1


def _subscript(m: re.Match) -> str:
    base, sub, star = m.groups()
    sub = sub if len(sub) == 1 else r"\text{" + sub + "}"
    return f"{base}_{{{sub}}}" + ("^*" if star else "")


def to_tex(text: str) -> str:
    out, k = [], 0
    while k < len(text):
        fn = next((f for f in FUNCTIONS if text.startswith(f + "(", k)
                   and (k == 0 or not text[k - 1].isalnum())), None)
        if fn:
            end = _closing(text, k + len(fn))
            left, right = FUNCTIONS[fn]
            out.append(left + to_tex(text[k + len(fn) + 1:end]) + right)
            k = end + 1
        elif text.startswith("**", k):
            rest = text[k + 2:].lstrip()
            skip = len(text) - k - 2 - len(rest)
            if rest.startswith("("):
                end = _closing(rest, 0)
                out.append("^{" + to_tex(rest[1:end]) + "}")
                k += 2 + skip + end + 1
            else:
                word = re.match(r"[\w.]+", rest)
                length = word.end() if word else 0
                out.append("^{" + rest[:length] + "}")
                k += 2 + skip + length
        else:
            out.append(SYMBOLS.get(text[k], text[k]))
            k += 1
    tex = "".join(out)
    tex = _NAME.sub(_subscript, tex)
    tex = re.sub(r"(?<=\w)\*(?!\w)", "^*", tex)
    # words ("for all", "act", "GB") upright, with their spaces: math mode drops both
    tex = " ".join(_WORDS.sub(lambda m: r"\ \text{" + m.group(1) + r"}\ ", tex).split())
    return re.sub(r"^\\ |\\$", "", tex).strip()      # no space command at either end
