"""Nothing a student receives gives away what the solutions derive.

The solutions print every derivation: the reference's `Worked` items
(`questions.answer_key`), each a formula, the numbers substituted and the
result. What a student receives is the handout (md, html, notebook) and the
starter kit (stubs, README, public cases, tests, writeup.md, the handout
again), for the course as built by `shardlab build`, and each student's
handout and blank answers.toml as written by `build --roster` (two variants).
None of it may contain

- a derived expression: each side of each Worked formula, compared after
  normalising the markup it could take (plain text as the reference writes
  it, the LaTeX the `tex` filter makes of it, the text of its MathML in the
  HTML; spaces, multiplication dots, braces and subscript marks dropped);
- a derived number: each Worked value and each number in its substituted
  numbers and result that the course config does not give, found among the
  numbers of the text whatever their format (thousands separators, 1.2e+11,
  1.2 × 10^11, MathML's split digits) and unit (bytes or GB, TB, MiB;
  seconds or ms, µs), at the precision the text prints (3 significant digits
  or more; a derived integer of two digits or more exactly);
- a derived result stated in words (DERIVED_IN_WORDS);
- a public case that poses the handout's own problem for its function
  (`posed`): its arguments equal to, a common multiple of, or all but one
  equal to those the worked answers call the reference function with
  (recorded while `answer_key` runs), on the course, the second course and
  the variants;
- the solutions' answer to 4 (c), why the bucket experiment's predicted and
  measured best sizes differ, in any file of the kit or in the note the
  kit's bucket experiment writes under its plot (`explains_4c`).

Numbers the config gives (model shape, hardware constants, mesh, networks,
bucket model, tokens) may appear, and so may the definitions the problem
gives (the alpha-beta cost of a collective, a matmul's FLOPs, the
compute-bound criterion, the bucket cost model), which no Worked formula is.
The last tests show that the same scan finds the derivations in the
solutions (md and html), so a normalisation that missed a markup would fail
here rather than pass quietly.

The stubs are also read for design answers no Worked item holds
(STUB_GIVEAWAYS), under both `[course] scaffolding`s: which collectives an
FSDP step issues, the 1F1B warm-up count, where DDP and FSDP average the
gradients, 1.4's rounding. The stubs' old words show the scan finding each.
"""
from __future__ import annotations

import ast
import bisect
import dataclasses
import html
import importlib
import inspect
import json
import math
import numbers
import re
import sys
import zipfile
from pathlib import Path

import pytest
from pydantic import BaseModel

from shardlab.autograder.core import content
from shardlab.autograder.core.parts import Call, Case
from shardlab.autograder.engine.plan import part_cases
from shardlab.autograder.engine.variants import variant_config
from shardlab.autograder.kit import bucket_experiment
from shardlab.autograder.publish.formats import mathml, notebook_json
from shardlab.autograder.publish.mathtext import to_tex
from shardlab.autograder.publish.render import build
from shardlab.autograder.publish.roster import build_roster
from shardlab.autograder.publish.stubs import generated_stubs
from shardlab.autograder.questions import all_parts, answer_key
from shardlab.reference.config import SCAFFOLDINGS, load_config, replaced

pytestmark = pytest.mark.pure

STUDENTS = ("s001", "ada@example.edu")
SECRET = "a long private course secret"

# derived results a text could state in words rather than as a formula or a number, each with
# the sub-question it would answer
DERIVED_IN_WORDS = {
    r"16\s*bytes\s*(per|/)\s*param": "1.2: the FP32 training state per parameter",
    r"(doesn't|do not|does not|don't)\s+depend\s+on\s+(the\s+)?(batch|B\b)": "3 (a): which times grow with B",
    r"independent\s+of\s+(the\s+)?(batch|B\b)": "3 (a): which times grow with B",
    r"grows?\s+linearly": "3 (a): which times grow with B",
    r"three\s+collectives|3\s+collectives": "2.6: the collectives of a step",
}

# units a derived quantity may be printed in: bytes as GB, TB, MB, MiB, GiB; seconds as ms, µs
SCALES = (1.0, 1e3, 1e6, 1e-3, 1e-6, 1e-9, 1e-12, 2.0 ** -20, 2.0 ** -30)

# ---- normalising math markup ----------------------------------------------------------------

_TEX_NAMES = {"alpha": "α", "beta": "β", "cdot": "", "times": "x", "ge": ">=", "geq": ">=", "le": "<=",
              "leq": "<=", "left": "", "right": "", "text": "", "mathrm": "", "operatorname": "",
              "lceil": "⌈", "rceil": "⌉", "lfloor": "⌊", "rfloor": "⌋", "iff": "⇔", "approx": "≈",
              "sum": "Σ", "to": "→", "frac": "", "quad": "", "qquad": ""}
_UNICODE = {"−": "-", "×": "x", "·": "", "⋅": "", "∗": "", "*": "", "≥": ">=", "≤": "<=", "\u2061": "",
            "\u2062": "", "\u2063": ""}


def _canon(text: str) -> str:
    """Text with its math markup normalised: LaTeX commands to symbols, `**` to `^`,
    multiplication signs, spaces, braces, `$`, backticks and subscript marks dropped."""
    text = html.unescape(text).replace("**", "^")
    text = re.sub(r"\\([A-Za-z]+)", lambda m: _TEX_NAMES.get(m.group(1), m.group(1)), text)
    for a, b in _UNICODE.items():
        text = text.replace(a, b)
    return re.sub(r"[\s`$\\{}_,]|\\[,;!]", "", text.lower())


def _strip_tags(page: str) -> str:
    """An HTML page's text; a MathML square root keeps its name, as LaTeX's does."""
    page = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    page = page.replace("<msqrt>", " sqrt ")
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def _expression(canon: str) -> bool:
    """An expression (an operator, 5 or more characters once normalised), not a bare name."""
    return len(canon) >= 5 and bool(re.search(r"[-+/^(>=<⌈⌊]|sqrt|log|ceil|floor", canon))


# the reference's symbols as the stubs' parameters name them (a docstring writes code)
PARAMETER_NAMES = {"T": "tokens", "P_unit": "unit_params", "C": "flops_per_second", "α": "alpha",
                   "β": "beta", "b": "bytes_per_param", "D": "d_model", "F": "d_ff", "L": "num_blocks",
                   "P": "num_params", "B": "tokens", "N": "n_devices", "X": "x", "Y": "y", "W_ici": "w_ici",
                   "M_X": "m_x", "M_Y": "m_y", "s": "model_bytes", "w": "bandwidth", "o": "call_overhead",
                   "n_b": "num_buckets", "act": "activation_bytes", "16P": "16 * num_params"}


def _as_code(piece: str) -> str:
    return re.sub(r"(?<![\w.])(16P|[A-Za-zα-ω]\w*)", lambda m: PARAMETER_NAMES.get(m.group(1), m.group(1)), piece)


def _renderings(piece: str) -> set[str]:
    """One formula as the reference writes it, as LaTeX, as the text of its MathML (where a
    square root is only its radicand: kept when that is still an expression), and as code
    with the stubs' parameter names."""
    tex = to_tex(piece)
    forms = (_canon(piece), _canon(tex), _canon(_strip_tags(mathml(tex, {}))), _canon(_as_code(piece)))
    return {c for c in forms if _expression(c)}


def _formula_pieces(worked) -> set[str]:
    """Each side of each equation of a Worked formula that is an expression."""
    return {piece.strip() for piece in re.split(r"[,;]\s| = |⇔|, then ", worked.formula)
            if _expression(_canon(piece))}


# ---- numbers, whatever their format --------------------------------------------------------

_NUMBER = re.compile(
    r"(?<![\w.])(?P<mant>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?:\s*[eE]\s*(?P<e1>[-+−]?\d+)|\s*(?:[×x·]|\\times)\s*10\s*\^?\s*\{?\s*(?P<e2>[-+−]?\d+)\}?)?")


@dataclasses.dataclass(frozen=True)
class Printed:
    """A number as a text prints it: its value, how many significant digits it shows, and
    whether it is a plain integer."""
    text: str
    value: float
    digits: int
    integer: bool


def _printed(text: str) -> list[Printed]:
    out = []
    for m in _NUMBER.finditer(text):
        mant = m.group("mant").replace(",", "")
        exp = (m.group("e1") or m.group("e2") or "0").replace("−", "-")
        value = float(mant) * 10.0 ** int(exp)
        integer = "." not in mant and exp == "0"
        digits = mant.replace(".", "").lstrip("0")
        if "." not in mant:
            digits = digits.rstrip("0") or "0"
        out.append(Printed(m.group(0), value, len(digits), integer))
    return out


def _given(cfg) -> set[float]:
    """Every number of the course config, the mesh's chip count N = X·Y (the handout
    states it with the mesh), and every task id, which reads as a number ("Task 5.11")."""
    found = {float(cfg.comm4d.x * cfg.comm4d.y), cfg.buckets.call_overhead_seconds}   # o as the code reads it
    found |= {float(p.id) for p in all_parts() if re.fullmatch(r"\d+\.\d+", p.id)}

    def walk(x):
        if dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                walk(getattr(x, f.name))
        elif isinstance(x, BaseModel):                  # a config section (`reference.config.sections`)
            for name in type(x).model_fields:
                walk(getattr(x, name))
        elif isinstance(x, dict):
            for y in x.values():
                walk(y)
        elif isinstance(x, (list, tuple)):
            for y in x:
                walk(y)
        elif isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x != 0:
            found.add(float(x))
    walk(cfg)
    return found


def _is_given(x: float, given: set[float]) -> bool:
    return x == 0 or any(math.isclose(x, g * s, rel_tol=1e-9) for g in given for s in SCALES)


def _shows_given(p: Printed, given: set[float]) -> bool:
    """A printed number that shows a given value: exactly, or at the precision it is printed with
    (a public run's bucket cap of 320 bytes printed beside it as '0.000305 MB')."""
    return _is_given(p.value, given) or any(_matches(p, g, False) for g in given)


def _scaled(values) -> list[tuple[float, float]]:
    """(v·s, v) for each value v and unit scale s, sorted by v·s (`_near`)."""
    return sorted((v * s, v) for v in values for s in SCALES)


def _near(scaled: list[tuple[float, float]], x: float) -> set[float]:
    """The values v with some v·s within 2% of x (x >= 0, a printed number): a superset of those
    `_is_given` can accept (within a relative 1e-9) and of those `_matches` can (equal to x, or
    within half a unit of its 3rd or a later significant digit: 0.5% of x at most), so that those
    exact tests run on a few candidates instead of on every value and scale."""
    lo = bisect.bisect_left(scaled, (0.98 * x, -math.inf))
    hi = bisect.bisect_right(scaled, (1.02 * x, math.inf))
    return {v for _, v in scaled[lo:hi]}


@dataclasses.dataclass
class Derived:
    formulas: dict[str, set[str]]          # formula piece -> its normalised renderings
    numbers: dict[float, str]              # derived number -> the Worked item it comes from
    exact: set[float]                      # the Worked values that are integers in base units
    given: set[float]


def _values(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        yield float(value)


def derived(cfg) -> Derived:
    given = _given(cfg)
    formulas, found, exact = {}, {}, set()
    for q, items in answer_key(cfg).items():
        for key, w in items.items():
            for piece in _formula_pieces(w):
                formulas[piece] = _renderings(piece)
            values = list(_values(w.value))
            exact |= {x for x in values if x.is_integer() and x >= 10 and not _is_given(x, given)}
            for x in values + [p.value for p in _printed(w.substituted + " " + w.shown)]:
                if x >= 10 and not _is_given(x, given):
                    found.setdefault(x, f"{q}.{key}")
    return Derived(formulas, found, exact, given)


def _matches(p: Printed, x: float, exact: bool) -> bool:
    """Does the printed number show x (in some unit), at the precision it is printed with?
    A derived integer (exact) also matches a plain integer of fewer digits."""
    if exact and p.integer and p.value == x:
        return True
    if p.digits < 3 or p.value == 0:
        return False
    ulp = 10.0 ** (math.floor(math.log10(abs(p.value))) - p.digits + 1)
    return any(abs(p.value - x * s) <= 0.5 * ulp * (1 + 1e-9) for s in SCALES)


def leaks(files: dict[str, str], d: Derived) -> list[str]:
    out = []
    # what a printed number shows depends on its value, digits and integer-ness only: the same number
    # recurs across the handout's md, html and notebook and the kit's copy, so each is judged once
    shows: dict[tuple[float, int, bool], list[tuple[float, str]]] = {}
    given_scaled, derived_scaled = _scaled(d.given), _scaled(d.numbers)
    for name, text in files.items():
        flat = _canon(_strip_tags(text) if name.endswith(".html") else text)
        out += [f"{name}: formula {piece!r}" for piece, forms in sorted(d.formulas.items())
                if any(f in flat for f in forms)]
        for p in _printed(text if not name.endswith(".html") else _strip_tags(text)):
            key = (p.value, p.digits, p.integer)
            if key not in shows:
                near = _near(derived_scaled, p.value)
                shows[key] = [] if _shows_given(p, _near(given_scaled, p.value)) else [
                    (x, where) for x, where in d.numbers.items() if x in near and _matches(p, x, x in d.exact)]
            out += [f"{name}: number {p.text!r} is {x:g} ({where})" for x, where in shows[key]]
        out += [f"{name}: {why} in words" for pattern, why in DERIVED_IN_WORDS.items()
                if re.search(pattern, text, re.I)]
    return out


# ---- what a student receives ----------------------------------------------------------------

def _readable(name: str, data: bytes) -> str | None:
    """A file's text as a reader sees it (a notebook's cells, JSON unescaped); None for images."""
    if name.endswith((".png", ".zip")):
        return None
    text = data.decode("utf-8")
    if name.endswith(".ipynb"):
        return "\n\n".join("".join(c["source"]) for c in json.loads(text)["cells"])
    if name.endswith(".json"):
        return json.dumps(json.loads(text), ensure_ascii=False, indent=1)
    return text


def _material(out: Path) -> dict[str, str]:
    files = {}
    for name in ("handout.md", "handout.html", "handout.ipynb"):
        files[name] = _readable(name, (out / name).read_bytes())
    with zipfile.ZipFile(out / "starter-kit.zip") as zf:
        for info in zf.infolist():
            text = _readable(info.filename, zf.read(info))
            if text is not None:
                files[f"kit/{info.filename}"] = text
    return files


@pytest.fixture(scope="module")
def course_build(cfg, tmp_path_factory):
    """`shardlab build` of the shipped course: the student material and the solutions."""
    out = tmp_path_factory.mktemp("build")
    build(cfg, out)
    return out


@pytest.fixture(scope="module")
def roster_build(cfg, tmp_path_factory):
    """`shardlab build --roster` for two students: each one's variant config and files."""
    from shardlab.autograder.engine.variants import variant_config
    course = replaced(cfg, {"course.secret": SECRET})
    out = tmp_path_factory.mktemp("roster")
    roster = out / "roster.csv"
    roster.write_text("student_id,name\n" + "".join(f"{s},Student {k}\n" for k, s in enumerate(STUDENTS)))
    build_roster(course, roster, out)
    return {s: (variant_config(course, s), out / "students" / s) for s in STUDENTS}


def _run_inputs(out: Path) -> set[float]:
    """The numbers of the kit's public runs' inputs (a bucket cap of 320 bytes, a seed) and of its
    public cases' named mistakes: given to the student like the config, so one that equals a derived
    value by chance is no leak."""
    with zipfile.ZipFile(out / "starter-kit.zip") as zf:
        runs = json.loads(zf.read("starter-kit/tests/public_runs.json"))
        cases = json.loads(zf.read("starter-kit/tests/public_cases.json"))
    given = {float(v) for q in runs.values() for run in q for v in run["args"].values()
             if isinstance(v, (int, float)) and not isinstance(v, bool) and v}
    # a public case's named-mistake values are computed on its own public inputs, not the course's
    # (5.8's bubble-ratio slip on p = 4 gives 38, the course's 1 (b) read with a global batch too)
    return given | {float(m[0]) for q in cases.values() for case in q for m in case["check"].get("mistakes", [])
                    if isinstance(m[0], (int, float)) and not isinstance(m[0], bool) and m[0]}


def test_the_course_handout_and_kit_give_nothing_away(cfg, course_build):
    d = derived(cfg)
    d.given |= _run_inputs(course_build)
    assert leaks(_material(course_build), d) == []


@pytest.mark.parametrize("student_id", STUDENTS)
def test_a_students_variant_gives_nothing_away(roster_build, student_id):
    variant, folder = roster_build[student_id]
    files = {p.name: _readable(p.name, p.read_bytes()) for p in folder.rglob("*") if p.is_file()}
    files = {k: v for k, v in files.items() if v is not None}
    assert {"handout.md", "handout.html", "answers.toml"} <= set(files)
    files["handout.ipynb"] = _readable("handout.ipynb", notebook_json(variant, files["handout.md"], {}).encode())
    d = derived(variant)
    assert d.numbers and d.formulas
    assert leaks(files, d) == []


def test_the_variants_differ_from_the_course(cfg, roster_build):
    """Otherwise the variant tests would only repeat the course's."""
    course = set(derived(cfg).numbers)
    for variant, _ in roster_build.values():
        assert set(derived(variant).numbers) != course


# ---- the stubs pose contracts, not designs, under either scaffolding ------------------------

# What no stub may say, under either scaffolding, because the handout asks the student to work it out:
# (stub module, function whose docstring is scanned or None for the whole stub, pattern, what it answers).
# Names count as much as prose: a guided skeleton's helper called reduce_scatter answers 2.6 too.
STUB_GIVEAWAYS = (
    ("fsdp", None, r"reduce[-_ ]?scatter", "2.6/2.9: the collective FSDP reduces gradients with"),
    ("fsdp", None, r"gather\w*\s+(\w+\s+){0,3}again|again\s+before\s+(its\s+|the\s+)?backward",
     "2.6/2.9: that backward all-gathers the weights again"),
    ("fsdp", None, r"forward,\s*backward,?\s*(and\s+)?gradients", "2.6: one collective per phase of a step"),
    ("fsdp", None, r"(three|3)\s+collectives", "2.6: the collectives of a step"),
    ("pipeline", None, r"\b(p|num_stages)\s*-\s*(stage|s)\s*-\s*1\b", "5.5/5.9: the 1F1B warm-up count"),
    ("pipeline", None, r"stages?\s+after\s+(it|this|the)\b", "5.5/5.9: the 1F1B warm-up count, in words"),
    ("buckets", None, r"divid\w*\s+(\S+\s+){0,4}by\s+(the\s+)?world[\s_]size|/\s*world\b",
     "4.5: where the gradients are averaged"),
    ("fsdp", None, r"divid\w*\s+(\S+\s+){0,4}by\s+(the\s+)?world[\s_]size|/\s*world\b",
     "2.7: where the gradients are averaged"),
    ("memory", "devices_needed", r"ceil|⌈", "1.4: the rounding"),
)
# a sentence that averages (or divides) at a named place says where gradients are averaged; the
# contract ("each .grad is the gradient of the mean loss over the whole batch") names no place
AVERAGING = r"averag\w*|mean\s+over\s+(the\s+)?ranks|divid\w*\s+(\S+\s+){0,4}by"
AVERAGED_AT = (r"finish_gradient_synchronization|reduce[-_ ]?scatter|all[-_ ]?reduce|bucket|hook|backward|"
               r"\.grad\b|shard")


def _docstring_of(text: str, function: str) -> str:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == function:
            return ast.get_docstring(node) or ""
    return ""


def stub_giveaways(stubs: dict[str, str]) -> list[str]:
    """What stubs (file name -> text) say that the handout asks the student to derive."""
    out = []
    for name, text in stubs.items():
        module = name.removesuffix(".py")
        for where, function, pattern, why in STUB_GIVEAWAYS:
            if where != module:
                continue
            scanned = text if function is None else _docstring_of(text, function)
            if m := re.search(pattern, scanned, re.I):
                out.append(f"{name}: {why}: {m.group(0)!r}")
        if module in ("buckets", "fsdp"):
            for sentence in re.split(r"(?<=[.;:])\s+", " ".join(text.split())):
                if re.search(AVERAGING, sentence, re.I) and re.search(AVERAGED_AT, sentence, re.I):
                    out.append(f"{name}: where the gradients are averaged: {sentence[:80]!r}")
    return out


@pytest.mark.parametrize("scaffolding", SCAFFOLDINGS)
def test_no_stub_answers_what_the_handout_asks(scaffolding):
    """The collectives of an FSDP step, the 1F1B warm-up count, where DDP and FSDP average
    gradients, 1.4's rounding: the student's to derive, in a guided kit as in a blank one."""
    assert stub_giveaways(generated_stubs(scaffolding)) == []


# the stubs' words before scaffolding was the course's choice (issue 29), each a giveaway
OLD_STUBS = {
    "fsdp.py": [
        "count every collective of a step (forward, backward, gradients) and what\n"
        "    each brings to one rank. Returns a float (bytes).",
        'class _ShardedLinear(torch.autograd.Function):\n    """y = x W^T + b with W, b gathered on demand; '
        'backward gathers again and\n    reduce-scatters the flat gradient."""',
        "module). Everything is FP32, collectives included. Before a unit's\n    forward its full weights are "
        "all-gathered and freed after; before its\n    backward they are all-gathered again; its gradients "
        "are\n    reduce-scattered, averaged over ranks, into the shard's .grad.",
        "    def reduce_scatter(self, grads):\n        raise NotImplementedError(\"_Unit.reduce_scatter\")",
    ],
    "pipeline.py": [
        "`targets`; every stage may use their shapes) and run, with\n    w = min(p - stage - 1, m):",
    ],
    "buckets.py": [
        "all-reduce per bucket per step. finish_gradient_synchronization() waits\n    for them, divides by "
        "the world size and writes the averaged gradients\n    back into each parameter's .grad.",
        '"""Wait for the bucket all-reduces, average, and write the gradients back."""',
    ],
    "memory.py": [
        'def devices_needed(total_bytes: int, device_bytes: int) -> int:\n    """Task 1.4. How many devices of '
        'device_bytes each hold total_bytes.\n\n    ceil(total_bytes / device_bytes), exactly (no floating-point '
        'rounding);\n    0 bytes need 0 devices. Returns an int.\n    """\n',
    ],
}


def test_the_stub_scan_finds_each_old_giveaway():
    for name, excerpts in OLD_STUBS.items():
        for excerpt in excerpts:
            assert stub_giveaways({name: excerpt}), (name, excerpt)
    # and the contract that replaced them passes
    assert not stub_giveaways({"buckets.py": "once finish_gradient_synchronization() returns each trainable "
                               "parameter's .grad is the gradient one process computes with the mean loss"})


# ---- the scan proves itself on the solutions ------------------------------------------------

def test_the_scan_finds_every_derived_formula_in_the_solutions(cfg, course_build):
    """Each formula piece is found in solutions.md (LaTeX) and in solutions.html (MathML):
    the normalisation reads both markups."""
    d = derived(cfg)
    for name in ("solutions.md", "solutions.html"):
        found = leaks({name: (course_build / name).read_text()}, d)
        missing = [piece for piece in d.formulas if f"{name}: formula {piece!r}" not in found]
        assert not missing, (name, missing)


def test_the_scan_finds_the_derived_numbers_in_the_solutions(cfg, course_build):
    """Every derived number the solutions print with 3 significant digits or more is found
    there (the few of fewer digits, such as 2 x capacity or p - 1, only as exact integers)."""
    d = derived(cfg)
    text = (course_build / "solutions.md").read_text()
    found = {line.split(" is ")[1].split(" (")[0] for line in leaks({"s.md": text}, d) if ": number " in line}
    distinctive = {f"{x:g}" for x in d.numbers if len(f"{x:.12g}".split("e")[0].replace(".", "").strip("0")) >= 3}
    assert len(distinctive) >= 30 and distinctive <= found, sorted(distinctive - found)


def test_the_scan_reads_numbers_in_any_format_and_unit():
    d = Derived({}, {3517578215424.0: "1.state", 0.007226315046050556: "2.forward", 61.0: "1.n_fsdp"},
                exact={3517578215424.0, 61.0}, given={80.0, 4096.0})
    for text in ("3,517,578,215,424 bytes", "3517578215424", "3.52e12 B", "3.518 × 10^12", "3,517.58 GB",
                 "3.52 TB", "7.226 ms", "7.23e-3 s", "N = 61", "7226.3 µs"):
        assert leaks({"x.md": text}, d), text
    for text in ("80 GB", "4,096 tokens", "3.5 TB", "7.2 ms", "Task 6.1", "1 device", "610 devices"):
        assert not leaks({"x.md": text}, d), text
    mathml_number = "<math><mn>3.518</mn><mo>×</mo><msup><mn>10</mn><mn>12</mn></msup></math>"
    assert leaks({"x.html": mathml_number}, d)


def test_a_planted_leak_is_found(cfg, course_build):
    """The handout as it was before this check (each derivation printed under its question)
    fails on every formula and on numbers; a public case message with a derived formula fails."""
    d = derived(cfg)
    key = answer_key(cfg)
    printed = "\n".join(f"- {w.quantity}: ${to_tex(w.formula)}$ = {w.shown}"
                        for items in key.values() for w in items.values())
    found = leaks({"handout.md": (course_build / "handout.md").read_text() + printed}, d)
    assert sum(": formula " in line for line in found) == len(d.formulas)
    assert any(": number " in line for line in found)
    assert leaks({"kit/tests/public_cases.json": "matches two collectives per step: so it is 3 (p-1)/p P b"}, d)
    assert leaks({"kit/README.md": "both come to 16 bytes per parameter"}, d)
    # the stubs' docstrings before this check: Task 2.2's and Task 2.5's derived expressions as code
    assert leaks({"kit/assignments/fsdp.py": "parameter per token, 2 * tokens * unit_params / flops_per_second."}, d)
    assert leaks({"kit/assignments/fsdp.py":
                  "flops_per_second/2 * (alpha * log2(p) / unit_params + bytes_per_param / beta)"}, d)


# ---- public cases that pose the handout's own problem ----------------------------------------

def _reference_function(module: str, function: str):
    return getattr(importlib.import_module(f"shardlab.reference.{module}"), function, None)


def _with_defaults(fn, args: dict) -> dict:
    bound = inspect.signature(fn).bind(**args)
    bound.apply_defaults()
    return dict(bound.arguments)


def course_calls(cfg) -> dict[str, list[dict]]:
    """{"module.function": [arguments, ...]}: what the worked answers (`answer_key`) call the
    reference function of each graded part with, i.e. the problems the handout poses for it.
    Recorded by profiling the calls, under whatever name a module imported the function."""
    functions = {}
    for part in all_parts(cfg):
        fn = _reference_function(part.module, part.function) if part.probe == "calls" and part.function else None
        if fn is not None:
            functions[fn.__code__] = (f"{part.module}.{part.function}", fn)
    found: dict[str, list[dict]] = {}

    def record(frame, event, arg):
        if event == "call" and frame.f_code in functions:
            name, fn = functions[frame.f_code]
            args = {k: frame.f_locals[k] for k in inspect.signature(fn).parameters}
            if args not in found.setdefault(name, []):
                found[name].append(args)
    previous = sys.getprofile()
    sys.setprofile(record)
    try:
        answer_key(cfg)
    finally:
        sys.setprofile(previous)
    return found


def _number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def poses(public: dict, course: dict) -> str | None:
    """How a public case's arguments pose the course's problem for the same function, or None:
    all equal; every number one common multiple of the course's (two numbers or more, the rest
    equal: these formulas are mostly homogeneous, so one factor gives the answer back); or, with
    three arguments or more, all but one equal (the handout's problem with one number changed,
    which one substitution, or one ratio for a formula proportional to it, undoes)."""
    names = list(course)
    if all(public[k] == course[k] for k in names):
        return "equals"
    scaled = [k for k in names if _number(public[k]) and _number(course[k]) and course[k] != 0]
    if len(scaled) >= 2 and all(public[k] == course[k] for k in names if k not in scaled):
        factor = public[scaled[0]] / course[scaled[0]]
        if all(math.isclose(public[k], factor * course[k], rel_tol=1e-9) for k in scaled):
            return f"is {factor:g} times"
    changed = [k for k in names if public[k] != course[k]]
    if len(names) >= 3 and len(changed) == 1:
        return f"changes only {changed[0]} of"
    return None


def public_cases(cfg) -> list[tuple[str, Case]]:
    """(part id, case) of every public case of the parts graded by plain calls."""
    return [(p.id, case) for p in all_parts(cfg) if p.probe == "calls" and p.function
            for case in part_cases(cfg, p.id) if case.public]


def posed(cfg, cases: list[tuple[str, Case]]) -> list[str]:
    """The cases whose calls pose a problem the worked answers of `cfg` solve."""
    problems = course_calls(cfg)
    out = []
    for part_id, case in cases:
        for call in case.calls:
            fn = _reference_function(call.module, call.function)
            args = _with_defaults(fn, call.args) if fn is not None else {}
            for course in problems.get(f"{call.module}.{call.function}", []):
                how = poses(args, course) if set(args) == set(course) else None
                if how:
                    out.append(f"{part_id} [{case.group}] {call.show()} {how} the handout's {course}")
    return out


A100 = content.folder("reference") / "courses" / "a100.toml"


def test_no_public_case_poses_the_courses_own_problem(cfg):
    assert {"buckets.ddp_overhead_seconds", "comm4d.forward_flops", "memory.min_fsdp_degree"} <= set(course_calls(cfg))
    assert posed(cfg, public_cases(cfg)) == []


def test_no_public_case_poses_the_second_courses_problem():
    course = load_config(A100)
    assert posed(course, public_cases(course)) == []
    variant = variant_config(course, STUDENTS[0])          # the second course has a secret and [variants]
    assert variant != course and posed(variant, public_cases(course)) == []


@pytest.mark.parametrize("student_id", STUDENTS)
def test_no_public_case_poses_a_variants_problem(cfg, roster_build, student_id):
    """The kit's public cases are the course's, the same for every student."""
    variant, _ = roster_build[student_id]
    assert posed(variant, public_cases(cfg)) == []
    assert posed(variant, public_cases(variant)) == []


def _planted(part_id: str, module: str, function: str, args: dict) -> tuple[str, Case]:
    return part_id, Case((Call(module, function, args),), True, "planted")


def test_the_check_finds_the_old_public_cases(cfg):
    """4.2's public "the course numbers, 25 buckets" and 3.1's public "the course model", as they were."""
    b, m = cfg.buckets, cfg.model
    old = [_planted("4.2", "buckets", "ddp_overhead_seconds", dict(
               model_bytes=b.model_bytes, bandwidth=b.bandwidth, call_overhead=b.call_overhead_seconds,
               num_buckets=25)),
           _planted("3.1", "comm4d", "forward_flops", dict(
               tokens=cfg.memory.tokens_per_device, d_model=m.d_model, d_ff=m.d_ff, num_blocks=m.num_blocks))]
    found = posed(cfg, old)
    assert {line.split(" ")[0] for line in found} == {"4.2", "3.1"}, found


@pytest.mark.parametrize("which", ["course", "second course", "variant"])
def test_the_check_finds_a_copy_or_a_multiple_of_the_handouts_arguments(cfg, roster_build, which):
    course = {"course": cfg, "second course": load_config(A100), "variant": roster_build[STUDENTS[0]][0]}[which]
    (args,) = course_calls(course)["memory.min_fsdp_degree"]
    for planted in (args, {k: 3 * v for k, v in args.items()}):
        assert posed(course, [_planted("1.6", "memory", "min_fsdp_degree", planted)])
    two_changed = dict(args, state_bytes=2 * args["state_bytes"], device_bytes=args["device_bytes"] // 2)
    assert not posed(course, [_planted("1.6", "memory", "min_fsdp_degree", two_changed)])


# ---- the answer to 4 (c): the solutions give it, the kit's bucket experiment does not ----------

def _answer_4c(solutions_md: str) -> str:
    section = re.split(r"\n#{1,3} ", solutions_md.split("### (c) Measure it", 1)[1], maxsplit=1)[0]
    return section.split("*Answer:*", 1)[1]


def _word_runs(text: str, k: int = 6) -> set[str]:
    words = re.findall(r"[a-z0-9√_]+", text.lower())
    return {" ".join(words[i:i + k]) for i in range(len(words) - k + 1)}


def explains_4c(files: dict[str, str], answer: str) -> list[str]:
    """Every run of six words of the solutions' answer to 4 (c) that a file repeats."""
    reasons = _word_runs(answer)
    return [f"{name}: {run!r}" for name, text in files.items() for run in sorted(_word_runs(text) & reasons)]


def _bench_note() -> str:
    """The note the kit's bucket experiment writes under its plot (a made-up run's numbers)."""
    fit = bucket_experiment.Fit(5e-5, 1e9, 0.1)
    return bucket_experiment.gap_note(dict(fit=fit, step_fit=bucket_experiment.Fit(1.2e-4, 6e8, 0.0), ratio=0.4,
                                           step_ratio=0.9, step_constant=0.05))


def test_the_kit_and_its_bench_plot_leave_4c_to_the_student(course_build):
    answer = _answer_4c((course_build / "solutions.md").read_text())
    assert len(_word_runs(answer)) > 50
    files = _material(course_build)
    assert any(name.endswith("bucket_experiment.py") for name in files)
    files["bench/buckets.png: the note under the plot"] = _bench_note()
    assert explains_4c(files, answer) == []


def test_the_4c_check_finds_the_old_bench_note(course_build):
    """The note the kit's plot carried before this check explained the gap."""
    answer = _answer_4c((course_build / "solutions.md").read_text())
    old_note = ("Not in the model: c, the cost of copying gradients into and out of buckets and averaging them, "
                "which grows with s, not n_b (it lifts the curve, it does not move its minimum); and the CPU that "
                "gloo's copies, sums and loopback sends take from the ranks' compute")
    assert explains_4c({"bench/buckets.png": old_note}, answer)
