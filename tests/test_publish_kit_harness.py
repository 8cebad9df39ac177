"""The kit's distributed checks are the grader's own code: every shipped module
is its source with only the imports renamed, nothing that answers a question
goes in. (The public runs themselves: tests/test_sandbox_gloo_local.py.)"""
import inspect
import re
from importlib import import_module

import pytest

from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.publish import kit_harness
from shardlab.autograder.publish.kit_harness import SHIPPED, harness_files, rewrite

pytestmark = pytest.mark.pure

# the reference's analytic modules and reference implementations: answers
ANSWERS = ("memory", "fsdp", "comm4d", "buckets", "pipeline", "buckets_ddp", "fsdp_module", "memory_measure",
           "derivation")


def test_every_shipped_file_is_its_source_with_renamed_imports():
    files = harness_files()
    paths = {}
    for origin, name in SHIPPED.items():
        paths[origin] = "tests/" + name.replace(".", "/") + (
            "/__init__.py" if hasattr(import_module(origin), "__path__") else ".py")
    assert set(files) == {f"tests/{kit_harness.KIT_PACKAGE}/__init__.py", *paths.values()}
    for origin, path in paths.items():
        source = inspect.getsource(import_module(origin))
        assert files[path] == rewrite(source, origin)
        # only import lines changed, line for line
        for a, b in zip(source.splitlines(), files[path].splitlines(), strict=True):
            assert a == b or (re.match(r"\s*(from|import) shardlab", a) and "shardlab" not in b.replace(
                "shardlab_local", "").replace("shardlab_check", "")), (path, a, b)


def test_no_shipped_module_imports_shardlab_or_an_answer():
    for path, text in harness_files().items():
        for line in re.findall(r"^\s*(?:from|import)\s+(\S+)", text, re.M):
            assert not line.startswith("shardlab."), (path, line)
    assert not any(origin.startswith("shardlab.solutions") for origin in SHIPPED)
    assert not any(origin.rsplit(".", 1)[-1] in ANSWERS and ".reference." in origin for origin in SHIPPED)


def test_a_module_importing_outside_the_kit_is_refused():
    with pytest.raises(ShardlabError, match="imports shardlab.reference.buckets"):
        rewrite("from shardlab.reference.buckets import assign_buckets\n", "some.module")


def test_a_comparator_not_named_in_run_checks_is_refused():
    from shardlab.autograder.kit.rank_comparison import StatesMatch
    with pytest.raises(ShardlabError, match="not named in kit/checks/__init__.py"):
        kit_harness.comparator_name(StatesMatch(rtol=0.5))
