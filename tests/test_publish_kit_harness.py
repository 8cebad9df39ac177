"""The kit's distributed checks are the grader's own code: the `kit` package is
shipped whole, file for file, and nothing that answers a question goes in.
(Its imports: tests/test_package_structure.py. The public runs themselves:
tests/test_kit_local_runs.py.)"""
import ast
from pathlib import Path

import pytest

from shardlab.autograder import kit
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.publish import kit_harness
from shardlab.autograder.publish.kit_harness import KIT_PACKAGE, LAUNCHERS, harness_files

pytestmark = pytest.mark.pure

KIT = Path(kit.__file__).parent


def test_every_kit_file_is_shipped_verbatim_and_nothing_else():
    files = harness_files()
    sources = {f"tests/{KIT_PACKAGE}/{p.relative_to(KIT)}": p.read_text() for p in KIT.rglob("*.py")
               if "__pycache__" not in p.parts}
    assert len(sources) > 20
    assert {path: text for path, text in files.items() if path not in LAUNCHERS} == sources
    assert set(files) - set(sources) == set(LAUNCHERS)


def test_the_launchers_only_call_the_package():
    for path, text in {p: t for p, t in harness_files().items() if p in LAUNCHERS}.items():
        tree = ast.parse(text)
        imported = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert imported == [f"{KIT_PACKAGE}.{LAUNCHERS[path][1]}"], path


def test_no_kit_file_imports_shardlab_or_an_answer():
    """Every import in a shipped file is relative, or of a library: no reference
    analytic module, no solution, nothing of shardlab by name."""
    allowed = {"torch", "numpy", "matplotlib", "__future__", "assignments"}     # assignments: the student's own code
    for path, text in harness_files().items():
        for node in ast.walk(ast.parse(text)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                top = name.split(".")[0]
                assert top in allowed or top == KIT_PACKAGE or top in _stdlib(), (path, name)


def _stdlib() -> frozenset[str]:
    import sys
    return frozenset(sys.stdlib_module_names)


def test_a_kit_file_importing_shardlab_by_name_is_refused(monkeypatch, tmp_path):
    fake = tmp_path / "kit"
    fake.mkdir()
    (fake / "__init__.py").write_text('"""a kit"""\n')
    (fake / "leak.py").write_text("from shardlab.reference.buckets import assign_buckets\n")
    monkeypatch.setattr(kit_harness, "resources", type("R", (), {"files": staticmethod(lambda _: fake)}))
    with pytest.raises(ShardlabError, match="kit/leak.py: it imports shardlab by name"):
        harness_files()


def test_a_comparator_not_named_in_the_checks_is_refused():
    from shardlab.autograder.kit.rank_comparison import StatesMatch
    with pytest.raises(ShardlabError, match="not named in the kit.checks package"):
        kit_harness.comparator_name(StatesMatch(rtol=0.5))


def test_comparators_are_found_by_their_names():
    from shardlab.autograder.kit.checks import TRAINS_LIKE_ONE_PROCESS, comparator_named, name_of
    from shardlab.autograder.kit.checks.fsdp import FSDP_STORAGE
    assert name_of(FSDP_STORAGE) == "fsdp.FSDP_STORAGE" and comparator_named("fsdp.FSDP_STORAGE") is FSDP_STORAGE
    assert name_of(TRAINS_LIKE_ONE_PROCESS) == "TRAINS_LIKE_ONE_PROCESS"
