"""assignments/ is generated from solutions/ and must not drift."""
import ast

import pytest

from autograder.questions import all_parts
from autograder.stubs import ASSIGNMENTS, SOLUTIONS, make_stub, stale_stubs


def test_stubs_are_in_sync():
    assert stale_stubs() == [], "run `shardlab stubs` (or `make stubs`)"


def _signatures(path):
    tree = ast.parse(path.read_text())
    return {n.name: (ast.dump(n.args) if isinstance(n, ast.FunctionDef) else "class", ast.get_docstring(n))
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("[!_]*.py")), ids=lambda p: p.name)
def test_stub_keeps_signatures_and_docstrings(path):
    assert _signatures(ASSIGNMENTS / path.name) == _signatures(path)


def test_every_graded_function_has_its_task_id_in_stub_and_docstring():
    for part in all_parts():
        if not part.function:
            continue
        stub = (ASSIGNMENTS / f"{part.module}.py").read_text()
        assert f'raise NotImplementedError("Task {part.id}: ' in stub, part.id
        doc = _signatures(SOLUTIONS / f"{part.module}.py")[part.function][1]
        assert doc.startswith(f"Task {part.id}."), (part.id, doc[:40])


def test_module_level_solution_blocks_are_dropped():
    src = "import os\n# BEGIN SOLUTION\nimport math\n# END SOLUTION\n\ndef f():\n    x = 1\n"
    out = make_stub(src, "memory")
    assert "import math" not in out and "import os" in out and "x = 1" in out
