"""assignments/ is generated from solutions/: each `# BEGIN SOLUTION` ...
`# END SOLUTION` block is replaced by a `raise NotImplementedError` naming the
task id from the part definitions (inside a function), or dropped (at module
level). One source, no drift: a test regenerates and compares.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from shardlab.autograder.core import content
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.questions import task_ids

SOLUTIONS, ASSIGNMENTS = content.folder("solutions"), content.folder("assignments")
BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")

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


def make_stub(source: str, module: str) -> str:
    tree = ast.parse(source)
    ids = task_ids()
    out, lines, i = [], source.splitlines(keepends=True), 0
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


def generated_stubs() -> dict[str, str]:
    """file name -> stub text, for every module in solutions/."""
    return {p.name: (make_stub(p.read_text(), p.stem) if p.name != "__init__.py"
                     else '"""Your solutions: fill in each module."""\n')
            for p in sorted(SOLUTIONS.glob("*.py"))}


def write_stubs(target: Path = ASSIGNMENTS) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in generated_stubs().items():
        (target / name).write_text(text)
        written.append(target / name)
    return written


def stale_stubs(target: Path = ASSIGNMENTS) -> list[str]:
    """Names of stub files that differ from what solutions/ generates."""
    return [name for name, text in generated_stubs().items()
            if not (target / name).is_file() or (target / name).read_text() != text]
