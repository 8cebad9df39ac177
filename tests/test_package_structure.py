"""The package's shape, checked: no module reaches for another's private
names, and the imports (function-level ones included) form no cycle.
test_package_imports.py imports every module on its own. ARCHITECTURE.md
describes the layout these keep."""
from __future__ import annotations

import ast
import textwrap

import pytest

from helpers import package_modules

pytestmark = pytest.mark.pure

MODULES = package_modules()


def _imports(name: str, tree: ast.Module, is_package: bool) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import in the module, at any depth."""
    out = []
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            out += [(base, a.name, node.lineno) for a in node.names]
    return out


def _edges(name: str) -> set[str]:
    """The shardlab modules `name` imports: `from pkg import mod` counts as importing pkg.mod."""
    tree, is_package = MODULES[name]
    targets = set()
    for module, imported, _ in _imports(name, tree, is_package):
        if f"{module}.{imported}" in MODULES:
            targets.add(f"{module}.{imported}")
        elif module in MODULES:
            targets.add(module)
    return targets - {name}


def test_the_modules_are_found():
    assert "shardlab.autograder.engine.grading" in MODULES and "shardlab.reference.memory" in MODULES
    assert len(MODULES) > 50


def test_no_private_name_crosses_a_module():
    crossings = []
    for name, (tree, is_package) in MODULES.items():
        aliases = {}
        for module, imported, line in _imports(name, tree, is_package):
            if not module.startswith("shardlab"):
                continue
            if imported and imported.startswith("_") and not imported.startswith("__"):
                crossings.append(f"{name}:{line} imports {module}.{imported}")
            if imported is None or f"{module}.{imported}" in MODULES:
                aliases[imported or module] = module
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                    and node.attr.startswith("_") and not node.attr.startswith("__")):
                crossings.append(f"{name}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not crossings, "\n".join(crossings)


def test_the_imports_form_no_cycle():
    graph = {name: _edges(name) for name in MODULES}
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(cycles)


def test_a_cycle_would_be_found(monkeypatch):
    """The cycle check sees function-level imports: a planted one is caught."""
    planted = ast.parse(textwrap.dedent("""
        def later():
            from shardlab.autograder.engine.grading import grade_folder
    """))
    tree, is_package = MODULES["shardlab.autograder.core.parts"]
    monkeypatch.setitem(MODULES, "shardlab.autograder.core.parts",
                        (ast.Module(body=tree.body + planted.body, type_ignores=[]), is_package))
    with pytest.raises(AssertionError, match="core.parts"):
        test_the_imports_form_no_cycle()


def test_a_private_crossing_would_be_found(monkeypatch):
    planted = ast.parse("from shardlab.autograder.engine import plan\nx = plan._hidden\n"
                        "from shardlab.autograder.engine.plan import _also_hidden\n")
    monkeypatch.setitem(MODULES, "shardlab.autograder.engine.toy", (planted, False))
    with pytest.raises(AssertionError) as found:
        test_no_private_name_crosses_a_module()
    assert "plan._hidden" in str(found.value) and "_also_hidden" in str(found.value)
