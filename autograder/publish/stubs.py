"""assignments/ is generated from solutions/: each `# BEGIN SOLUTION` ...
`# END SOLUTION` block is replaced by a `raise NotImplementedError` naming the
task id from the part definitions (inside a function), or dropped (at module
level). One source, no drift: a test regenerates and compares.

How much else a stub keeps is the course's `[course] scaffolding`
(docs/config.md), marked in solutions/ two ways:

- `# BEGIN SCAFFOLD` ... `# END SCAFFOLD` around private helpers (classes,
  functions, methods) a guided stub keeps as a skeleton (their bodies still
  stubbed by the solution blocks inside) and a blank stub drops;
- a docstring paragraph that starts with `Hint:` (an API to reach for, a
  pitfall of the backend), which a guided stub keeps and a blank stub drops.

A blank stub is each graded function's or class's signature, task id, units
and contract; the marker lines themselves never reach a stub. Neither mode
may answer what the handout asks the student to derive:
tests/test_publish_no_giveaways.py scans both.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from shardlab.autograder.core import content, course_folders
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.questions import is_own, own_folder, questions, task_ids
from shardlab.reference.config import SCAFFOLDINGS, default_value

SOLUTIONS, ASSIGNMENTS = content.folder("solutions"), content.folder("assignments")
BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
BEGIN_SCAFFOLD = re.compile(r"^\s*# BEGIN SCAFFOLD\s*$")
END_SCAFFOLD = re.compile(r"^\s*# END SCAFFOLD\s*$")
HINT = re.compile(r"^\s*Hint:")
# what the committed assignments/ hold: the course config's default (`[course] scaffolding`)
DEFAULT_SCAFFOLDING: str = default_value("course", "scaffolding")

STUB_HEADER = ("# Generated from solutions/ by `shardlab stubs`: fill in every function that\n"
               "# raises NotImplementedError. Keep the names and signatures.\n")


def _enclosing(tree: ast.Module, line: int) -> list[str]:
    """Names of the classes/functions around a line, outermost first."""
    names, nodes = [], tree.body
    while True:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and node.end_lineno is not None and node.lineno <= line <= node.end_lineno:
                names.append(node.name)
                nodes = node.body
                break
        else:
            return names


def _scaffold_kept(lines: list[str], module: str, keep: bool) -> list[str]:
    """The lines without their SCAFFOLD markers, and without what they enclose unless `keep`
    (then without the blank lines after a block too, which separated it from what follows)."""
    out, inside, dropped = [], 0, False
    for number, line in enumerate(lines, start=1):
        if BEGIN_SCAFFOLD.match(line):
            if inside:
                raise ShardlabError(f"solutions/{module}.py line {number}: BEGIN SCAFFOLD inside another")
            inside = number
        elif END_SCAFFOLD.match(line):
            if not inside:
                raise ShardlabError(f"solutions/{module}.py line {number}: END SCAFFOLD without BEGIN")
            inside, dropped = 0, not keep
        elif keep or not inside:
            if not (dropped and not line.strip()):
                out.append(line)
                dropped = False
    if inside:
        raise ShardlabError(f"solutions/{module}.py line {inside}: BEGIN SCAFFOLD without END")
    return out


def _docstring_lines(tree: ast.Module) -> list[tuple[int, int]]:
    """(first, last) line, 1-based, of every docstring of the module, its classes and functions."""
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str) and first.end_lineno is not None:
                spans.append((first.lineno, first.end_lineno))
    return spans


def _hints_dropped(lines: list[str], module: str) -> list[str]:
    """The lines without the docstring paragraphs that start with `Hint:` (and the blank
    line before each). A hint runs to the next blank line or the docstring's closing line,
    which must hold only the closing quotes."""
    drop: set[int] = set()                                   # 0-based line indexes
    for first, last in _docstring_lines(ast.parse("".join(lines))):
        closing, i = last - 1, first          # 0-based: the closing line; the line after the opening one
        while i <= closing:
            if HINT.match(lines[i]) and not lines[i - 1].strip():
                end = i
                while end + 1 < closing and lines[end + 1].strip():
                    end += 1
                if end + 1 >= closing and lines[closing].strip() not in ('"""', "'''"):
                    raise ShardlabError(f"solutions/{module}.py line {last}: a Hint: paragraph must not end "
                                        "on the docstring's closing line (put the quotes on a line of their own)")
                drop.update(range(i - 1, end + 1))
                i = end + 1
            else:
                i += 1
    return [line for k, line in enumerate(lines) if k not in drop]


def make_stub(source: str, module: str, scaffolding: str = DEFAULT_SCAFFOLDING) -> str:
    """The stub of one solutions/ module under a course's scaffolding ("guided" or "blank")."""
    if scaffolding not in SCAFFOLDINGS:
        raise ShardlabError(f"scaffolding must be one of {', '.join(map(repr, SCAFFOLDINGS))}, "
                            f"got {scaffolding!r}")
    guided = scaffolding == "guided"
    lines = _scaffold_kept(source.splitlines(keepends=True), module, keep=guided)
    if not guided:
        lines = _hints_dropped(lines, module)
    source = "".join(lines)
    tree = ast.parse(source)
    ids = task_ids()
    out, i = [], 0
    while i < len(lines):
        m = BEGIN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        start = i
        while i < len(lines) and not END.match(lines[i]):
            i += 1
        if i == len(lines):
            raise ShardlabError(f"solutions/{module}.py line {start + 1}: BEGIN SOLUTION without END")
        names = _enclosing(tree, start + 1)
        if names:
            task = next((ids[(module, n)] for n in names if (module, n) in ids), None)
            label = f"Task {task}: " if task else ""
            out.append(f'{m.group(1)}raise NotImplementedError("{label}{".".join(names)}")\n')
        i += 1
    return STUB_HEADER + "".join(out)


def without_hints(docstring: str) -> str:
    """A docstring (as `ast.get_docstring` gives it) as a blank stub keeps it: no `Hint:` paragraphs."""
    paragraphs = re.split(r"\n\s*\n", docstring)
    return "\n\n".join(p for p in paragraphs if not HINT.match(p))


def generated_stubs(scaffolding: str = DEFAULT_SCAFFOLDING) -> dict[str, str]:
    """file name -> stub text, for every module in solutions/."""
    return {p.name: (make_stub(p.read_text(), p.stem, scaffolding) if p.name != "__init__.py"
                     else '"""Your solutions: fill in each module."""\n')
            for p in sorted(SOLUTIONS.glob("*.py"))}


def own_solutions(cfg) -> dict[str, Path]:
    """file name -> solution, for the course's own questions: `<module>.py` -> its folder's solution.py
    (what `solutions/<module>.py` is to a shipped question)."""
    out = {}
    for q in questions(cfg):
        folder = own_folder(q) if is_own(q) else None
        if folder is not None:
            out[f"{q.module}.py"] = folder.needed(course_folders.SOLUTION)
    return out


def own_stubs(cfg, scaffolding: str = DEFAULT_SCAFFOLDING) -> dict[str, str]:
    """file name -> stub text, for the course's own questions (`own_solutions`)."""
    return {name: make_stub(path.read_text(encoding="utf-8"), name.removesuffix(".py"), scaffolding)
            for name, path in own_solutions(cfg).items()}


def write_stubs(target: Path = ASSIGNMENTS, scaffolding: str = DEFAULT_SCAFFOLDING) -> list[Path]:
    """Write the stubs into `target`. The course's own assignments/ holds the default
    scaffolding's (a test keeps them in sync); another is written elsewhere."""
    if Path(target).resolve() == ASSIGNMENTS.resolve() and scaffolding != DEFAULT_SCAFFOLDING:
        raise ShardlabError(f"assignments/ holds the default scaffolding's stubs ({DEFAULT_SCAFFOLDING!r}): "
                            f"write {scaffolding!r} stubs to another folder (--out DIR)")
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generated_stubs(scaffolding).items():
        (target / name).write_text(text)
        written.append(target / name)
    return written


def stale_stubs(target: Path = ASSIGNMENTS, scaffolding: str = DEFAULT_SCAFFOLDING) -> list[str]:
    """Names of stub files that differ from what solutions/ generates."""
    return [name for name, text in generated_stubs(scaffolding).items()
            if not (target / name).is_file() or (target / name).read_text() != text]
