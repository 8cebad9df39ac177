"""The `cfg` contract own questions rely on (ARCHITECTURE.md, "The cfg contract"): the
tp example as it was spelt before every setting was declared once (`cfg.gpu`,
`cfg.tokens_per_device`, `cfg.seed`, `cfg.fsdp.intra`, beside `cfg.model` and
`cfg.fsdp.intra_devices`) reads the same course, renders the same handout and
solutions, draws the same cases, and `shardlab build` says once per earlier name
what it is called now.

Each course's own question is loaded in a subprocess (the registry of this process
stays the package's); the example itself is spelt today's way, and the earlier
spelling is made from it here, name by name.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from shardlab.autograder.core import content
from helpers import run_cli

pytestmark = [pytest.mark.platform, pytest.mark.timeout(1200)]

EXAMPLE = content.ROOT / "examples" / "tp-course"
# today's name -> the name the example used before (examples/tp-course at the previous release)
EARLIER = {"cfg.memory.tokens_per_device": "cfg.tokens_per_device", "cfg.memory.gpu": "cfg.gpu",
           "cfg.course.seed": "cfg.seed", "cfg.fsdp.intra_network": "cfg.fsdp.intra"}
KEPT = ("cfg.model", "cfg.fsdp.intra_devices")       # the same in both spellings
FILES = ("question.py", "reference.py", "template.md.j2")

SCRIPT = textwrap.dedent('''
    import json, sys
    from shardlab.autograder.engine.plan import part_cases
    from shardlab.autograder.publish.render import render_markdown
    from shardlab.autograder.questions import all_parts, answer_key
    from shardlab.reference.config import load_config
    from shardlab.reference.config.renamed import used

    cfg = load_config(sys.argv[1])
    print(json.dumps({"answers": json.dumps(answer_key(cfg), default=repr, sort_keys=True),
                      "handout": render_markdown(cfg, False), "solutions": render_markdown(cfg, True),
                      "cases": {p.id: repr(part_cases(cfg, p.id)) for p in all_parts(cfg)},
                      "used": used()}))
''')


@pytest.fixture(scope="module")
def earlier(tmp_path_factory):
    """The example course with its question spelt the earlier way."""
    course = tmp_path_factory.mktemp("earlier") / "tp-course"
    shutil.copytree(EXAMPLE, course, ignore=shutil.ignore_patterns("__pycache__"))
    for file in FILES:
        path = course / "questions" / "tp" / file
        text = path.read_text(encoding="utf-8")
        for today, before in EARLIER.items():
            text = text.replace(today, before)
        path.write_text(text, encoding="utf-8")
    return course


def _read(course) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(course / "course.toml")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout)
    for what in ("handout", "solutions"):       # the solutions name the config file they were built from
        read[what] = read[what].replace(str(course), "<course>")
    return read


def test_the_earlier_spelling_is_every_name_of_the_contract(earlier):
    text = "".join((earlier / "questions" / "tp" / f).read_text(encoding="utf-8") for f in FILES)
    for name in [*EARLIER.values(), *KEPT]:
        assert name in text, name
    for today in EARLIER:
        assert today not in text, today


def test_the_earlier_spelling_reads_renders_and_draws_the_same_course(earlier):
    before, today = _read(earlier), _read(EXAMPLE)
    for what in ("answers", "handout", "solutions", "cases"):
        assert before[what] == today[what], what
    assert "6.1" in today["cases"] and "tensor parallelism" in today["handout"]
    assert today["used"] == {}                    # the example is spelt today's way
    assert before["used"] == {before_: today_ for today_, before_ in EARLIER.items()}


@pytest.mark.parametrize("course", [content.folder("reference"), content.folder("reference") / "courses"],
                         ids=["shipped", "a100"])
def test_the_package_reads_no_earlier_name(course, tmp_path):
    # every renderer, worked derivation and case generator of the package reads today's names, so
    # `build` warns only of an own question's (a neighbour's new code in an earlier name fails here)
    if course.name == "courses":
        (tmp_path / "course.toml").write_bytes((course / "a100.toml").read_bytes())
        course = tmp_path
    assert _read(course)["used"] == {}


def test_build_says_once_per_earlier_name_what_it_is_now(earlier, tmp_path):
    done = run_cli("build", "--config", str(earlier / "course.toml"), "--out", str(tmp_path / "out"), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in done.stderr.splitlines() if "is the earlier name of" in line]
    assert sorted(said) == sorted(f"warning: {before} is the earlier name of {today}: it still works; rename it "
                                  "in your question (docs/config.md)" for today, before in EARLIER.items())
