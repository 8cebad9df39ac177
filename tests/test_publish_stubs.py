"""assignments/ is generated from solutions/ and must not drift."""
import ast

import pytest

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.publish.starter import kit_files
from shardlab.autograder.questions import all_parts
from shardlab.reference.config import load_config
from shardlab.autograder.publish.stubs import (ASSIGNMENTS, DEFAULT_SCAFFOLDING, SOLUTIONS, generated_stubs,
                                               make_stub, stale_stubs, without_hints)

pytestmark = pytest.mark.pure


def test_stubs_are_in_sync():
    assert stale_stubs() == [], "run `shardlab stubs` (or `make stubs`)"


def _signatures(path, text=None, private=False, hints=True):
    """Public classes, functions and methods by qualified name (functions nested
    inside function bodies are solution code, not interface); with `private`,
    the private helpers too; without `hints`, docstrings as a blank stub keeps them."""
    out = {}

    def visit(nodes, prefix):
        for n in nodes:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and (private or not n.name.startswith("_")) \
                    or isinstance(n, ast.FunctionDef) and n.name.startswith("__") and prefix:
                is_fn = isinstance(n, ast.FunctionDef)
                doc = ast.get_docstring(n)
                out[prefix + n.name] = (ast.dump(n.args) if is_fn else "class",
                                        doc if hints or doc is None else without_hints(doc))
            if isinstance(n, ast.ClassDef) and (private or not n.name.startswith("_")):
                visit(n.body, prefix + n.name + ".")
    visit(ast.parse(text if text is not None else path.read_text()).body, "")
    return out


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("[!_]*.py")), ids=lambda p: p.name)
def test_stub_keeps_signatures_and_docstrings(path):
    """The committed stubs (the default scaffolding, blank) keep the public interface; their
    docstrings are the solutions' without the hints."""
    assert DEFAULT_SCAFFOLDING == "blank"
    assert _signatures(ASSIGNMENTS / path.name) == _signatures(path, hints=False)


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("[!_]*.py")), ids=lambda p: p.name)
def test_guided_stub_keeps_every_helper_and_hint(path):
    guided = generated_stubs("guided")[path.name]
    assert _signatures(path, guided, private=True) == _signatures(path, private=True)


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


def _private_names(text: str) -> list[str]:
    """Private classes, functions and methods (not dunders), by qualified name."""
    out = []

    def visit(nodes, prefix):
        for n in nodes:
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
                if n.name.startswith("_") and not n.name.startswith("__"):
                    out.append(prefix + n.name)
                if isinstance(n, ast.ClassDef):
                    visit(n.body, prefix + n.name + ".")
    visit(ast.parse(text).body, "")
    return out


def _hints(text: str) -> list[str]:
    """The docstring paragraphs of a module that start with "Hint:", whitespace collapsed."""
    docs = [ast.get_docstring(n) for n in ast.walk(ast.parse(text))
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return [" ".join(p.split()) for d in docs if d for p in d.split("\n\n") if p.lstrip().startswith("Hint:")]


def test_blank_stubs_have_no_private_helpers_and_no_hints():
    blank, guided = generated_stubs("blank"), generated_stubs("guided")
    for name, text in blank.items():
        assert _private_names(text) == [], name
        assert _hints(text) == [], name
        assert "SCAFFOLD" not in text and "SCAFFOLD" not in guided[name], name
    # the marking is in use: what blank drops, guided keeps, every hint of the solutions included
    assert {"_Unit", "_ShardedLinear", "FSDP._sharded_forward"} <= set(_private_names(guided["fsdp.py"]))
    hints = {p.name: _hints(p.read_text()) for p in SOLUTIONS.glob("[!_]*.py")}
    assert hints["buckets.py"] and hints["pipeline.py"]
    for name, paragraphs in hints.items():
        assert _hints(guided[name]) == paragraphs, name


def test_scaffold_blocks_and_hints_in_a_module():
    src = ('def param_count():\n    """Task 1.1. Contract.\n\n    Hint: an API.\n    """\n    # BEGIN SOLUTION\n'
           '    return _g()\n    # END SOLUTION\n\n\n# BEGIN SCAFFOLD\ndef _g():\n    # BEGIN SOLUTION\n'
           '    return 1\n    # END SOLUTION\n# END SCAFFOLD\n\n\nclass C:\n    pass\n')
    guided, blank = make_stub(src, "memory", "guided"), make_stub(src, "memory", "blank")
    assert "Hint: an API." in guided and 'raise NotImplementedError("_g")' in guided and "SCAFFOLD" not in guided
    assert blank.endswith('    """Task 1.1. Contract.\n    """\n'
                          '    raise NotImplementedError("Task 1.1: param_count")\n\n\nclass C:\n    pass\n'), blank
    for broken, why in ((src.replace("# END SCAFFOLD\n", ""), "BEGIN SCAFFOLD without END"),
                        (src.replace("# BEGIN SCAFFOLD\n", ""), "END SCAFFOLD without BEGIN"),
                        (src.replace("an API.\n    ", "an API."), "closing line")):
        with pytest.raises(ShardlabError, match=why):
            make_stub(broken, "memory", "blank")
    with pytest.raises(ShardlabError, match="'blank', 'guided'"):
        make_stub(src, "memory", "full")


@pytest.mark.parametrize("scaffolding", ["blank", "guided"])
def test_a_course_builds_its_kit_with_its_scaffolding(tmp_path, scaffolding):
    (tmp_path / "course.toml").write_text(f'[course]\nscaffolding = "{scaffolding}"\n')
    cfg = load_config(tmp_path / "course.toml")
    files = kit_files(cfg, "")
    shipped = {name.removeprefix("assignments/"): text for name, text in files.items()
               if name.startswith("assignments/")}
    assert shipped == generated_stubs(scaffolding)
    assert ("class _Unit" in shipped["fsdp.py"]) == (scaffolding == "guided")
