"""The package's shape, checked: the folders are layers and no import runs up
them, the kit imports only itself, no list outside a question names its
parts, no module reaches for another's private
names, and the imports (function-level ones included) form no cycle.
test_package_imports.py imports every module on its own. ARCHITECTURE.md
describes the layout these keep."""
from __future__ import annotations

import ast
import functools
import textwrap

import pytest

from helpers import package_modules

pytestmark = pytest.mark.pure

MODULES: dict[str, tuple[ast.Module, bool]] = {}
"""helpers.package_modules(), filled while this file's tests run (`parsed_modules`)."""


@pytest.fixture(scope="module", autouse=True)
def parsed_modules():
    """Parse the course folders when this file runs, not when it is collected, and drop the trees
    after: about 220,000 syntax nodes that every other file's process (each xdist worker) would
    otherwise parse and then carry through every garbage collection of the session."""
    MODULES.update(package_modules())
    yield
    MODULES.clear()
    _nodes.cache_clear()


@functools.lru_cache(maxsize=None)
def _nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    """Every node of a tree, in ast.walk's order: walked once, not once per check (a planted
    tree is a new object, so it is walked afresh)."""
    return tuple(ast.walk(tree))


def _imports(name: str, tree: ast.Module, is_package: bool) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for every import in the module, at any depth."""
    out = []
    package = name if is_package else name.rpartition(".")[0]
    for node in _nodes(tree):
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
        for node in _nodes(tree):
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


# ---- layers: folders, bottom up; no import runs upward -------------------------------
# Each entry: (folder, its modules' prefix). A module belongs to the longest prefix it
# starts with; the top level of autograder (cli, selfcheck) is the top layer.
LAYERS = (
    ("kit", "shardlab.autograder.kit"),                  # the starter kit's code: imports only itself
    ("core", "shardlab.autograder.core"),                # the vocabulary: parts, results, phases, errors
    ("reference", "shardlab.reference"),                 # the ground truth
    ("sandbox", "shardlab.autograder.sandbox"),          # running student code
    ("questions", "shardlab.autograder.questions"),      # one folder per question
    ("engine", "shardlab.autograder.engine"),            # one grading: plan, probes, scoring
    ("platforms", "shardlab.autograder.platforms"),      # otter, batch, Gradescope exports
    ("publish", "shardlab.autograder.publish"),          # what `shardlab build` writes
    ("top", "shardlab.autograder"),                      # cli, selfcheck
)
STUDENT_CODE = ("shardlab.solutions", "shardlab.assignments", "shardlab.templates")


def _layer(module: str) -> int | None:
    if module.startswith(STUDENT_CODE):
        return None
    return max((k for k, (_, prefix) in enumerate(LAYERS) if module == prefix or module.startswith(prefix + ".")),
               key=lambda k: len(LAYERS[k][1]))


def upward_imports(modules=None) -> list[str]:
    """Every import from a folder into a folder above it in LAYERS."""
    found = []
    for name in sorted(modules or MODULES):
        mine = _layer(name)
        for target in sorted(_edges(name)):
            theirs = _layer(target)
            if mine is not None and theirs is not None and theirs > mine:
                found.append(f"{name} ({LAYERS[mine][0]}) imports {target} ({LAYERS[theirs][0]})")
    return found


def test_every_module_is_in_a_layer():
    assert all(_layer(name) is not None or name.startswith(STUDENT_CODE) for name in MODULES)
    assert {LAYERS[_layer(n)][0] for n in MODULES if _layer(n) is not None} == {name for name, _ in LAYERS}


def test_no_import_runs_up_the_layers():
    assert not upward_imports(), "\n".join(upward_imports())


def test_an_upward_import_would_be_found(monkeypatch):
    planted = ast.parse("def later():\n    from shardlab.autograder.engine.grading import grade_folder\n")
    tree, is_package = MODULES["shardlab.autograder.questions"]
    monkeypatch.setitem(MODULES, "shardlab.autograder.questions",
                        (ast.Module(body=tree.body + planted.body, type_ignores=[]), is_package))
    assert upward_imports() == ["shardlab.autograder.questions (questions) imports "
                                "shardlab.autograder.engine.grading (engine)"]


def kit_imports_by_name() -> list[str]:
    """Imports of shardlab by its name anywhere in the kit package (the kit is shipped
    whole under another name, so it may import itself only relatively)."""
    found = []
    for name, (tree, _) in sorted(MODULES.items()):
        if name == "shardlab.autograder.kit" or name.startswith("shardlab.autograder.kit."):
            for node in _nodes(tree):
                named = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                found += [f"{name}:{node.lineno} imports {m}" for m in named if m.split(".")[0] == "shardlab"]
    return found


def test_the_kit_imports_only_itself():
    assert not kit_imports_by_name(), "\n".join(kit_imports_by_name())


def test_a_named_import_in_the_kit_would_be_found(monkeypatch):
    planted = ast.parse("def later():\n    from shardlab.autograder.kit.comparison import check\n")
    tree, is_package = MODULES["shardlab.autograder.kit.local"]
    monkeypatch.setitem(MODULES, "shardlab.autograder.kit.local",
                        (ast.Module(body=tree.body + planted.body, type_ignores=[]), is_package))
    assert kit_imports_by_name() == ["shardlab.autograder.kit.local:2 imports shardlab.autograder.kit.comparison"]


def test_no_list_outside_a_question_names_its_parts():
    """Part ids are typed only in the question's own folder (and the docs): which parts
    are drawn, shipped or traced is read off the definitions."""
    from shardlab.autograder.questions import all_parts
    ids = {p.id for p in all_parts()}
    typed = [f"{name}:{node.lineno} {node.value!r}" for name, (tree, _) in MODULES.items()
             if not name.startswith(("shardlab.autograder.questions.", "shardlab.solutions", "shardlab.assignments"))
             for node in _nodes(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and node.value in ids]
    assert not typed, "\n".join(typed)
