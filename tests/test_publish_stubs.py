"""assignments/ is generated from solutions/ and must not drift."""
import ast

import pytest

from shardlab.autograder.questions import all_parts
from shardlab.autograder.publish.stubs import ASSIGNMENTS, SOLUTIONS, make_stub, stale_stubs

pytestmark = pytest.mark.pure


def test_stubs_are_in_sync():
    assert stale_stubs() == [], "run `shardlab stubs` (or `make stubs`)"


def _signatures(path):
    """Public classes, functions and methods by qualified name (functions nested
    inside function bodies are solution code, not interface)."""
    out = {}

    def visit(nodes, prefix):
        for n in nodes:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_") \
                    or isinstance(n, ast.FunctionDef) and n.name.startswith("__") and prefix:
                is_fn = isinstance(n, ast.FunctionDef)
                out[prefix + n.name] = (ast.dump(n.args) if is_fn else "class", ast.get_docstring(n))
            if isinstance(n, ast.ClassDef):
                visit(n.body, prefix + n.name + ".")
    visit(ast.parse(path.read_text()).body, "")
    return out


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
