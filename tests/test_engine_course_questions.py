"""A course's own question folders (`[course] question_dirs`, `core.course_folders`,
`questions.own_questions`): what a broken folder gets, one line naming it, and
that a good one joins the course beside the package's questions and nowhere else.

A subprocess loads them (the registry and sys.modules of this process stay
the package's alone); the end-to-end run of a real course question is
tests/test_platforms_course_questions.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from helpers import run_cli

pytestmark = pytest.mark.sandbox

REFERENCE = 'def double(x: int) -> int:\n    return 2 * x\n'
QUESTION = '''\
from shardlab.autograder.core.parts import EXACT_INT, function_part
from shardlab.autograder.questions import Question
from shardlab.reference import {name} as ref


def _args(cfg, rng):
    yield dict(x=3), True, "small"


QUESTION = Question(number={number}, module="{name}", title="Toy", template="{name}.md.j2", parts=(
    function_part("{number}.1", "{name}", "double", ref.double, 1, _args, compare=EXACT_INT),
))
'''
def _second_part(part_id: str, function: str) -> str:
    """QUESTION with a second part, `function_part(part_id, ..., function, ...)`."""
    second = f'    function_part("{part_id}", "{{name}}", "{function}", ref.double, 1, _args),\n'
    return QUESTION.replace("),\n))", "),\n" + second + "))")


TWICE = _second_part("{number}.1", "triple")
SAME_FUNCTION = _second_part("{number}.2", "double")
WORKED = QUESTION.replace('template="{name}.md.j2", ', 'template="{name}.md.j2", worked=ref.worked, ')
RAISING = REFERENCE + 'def worked(cfg):\n    return {{"x": _half(0)}}\n\n\ndef _half(x):\n    return 1 / x\n'
GLOO = '''\
from shardlab.autograder.core.parts import REAL, Call, Case, Part
from shardlab.autograder.questions import Question


def _cases(cfg, rng):
    return [Case((Call("{name}", "toy_run", dict(world_size=2, seed=1)),), public=True, note="a run")]


QUESTION = Question(number={number}, module="{name}", title="Toy", template="{name}.md.j2", parts=(
    Part(id="{number}.1", title="a run", module="{name}", points=1, probe="gloo", cases=_cases,
         expect=lambda case: [0], compare=REAL),
))
'''
SCENARIO = '''\
from . import Scenario, register


@register
class Toy(Scenario):
    name = "{scenario}"
'''
EXPECT = {"zeros": 'description = "a typo"\nzeros = ["{number}.1"]\n',
          "no part": 'description = "a wrong id"\nzero = ["99.1"]\nfeedback = {{ "99.2" = "x" }}\n'}
FOLDERS = {
    # name: (files, number); each is its own course with question_dirs = ["q_<name>"]
    "good": ({"question.py": QUESTION, "reference.py": REFERENCE, "solution.py": "", "template.md.j2": "x\n"}, 7),
    "clash": ({"question.py": QUESTION, "reference.py": REFERENCE}, 2),             # part 2.1 is FSDP's
    "nameless": ({"question.py": QUESTION}, 8),                                      # no reference.py
    "broken": ({"question.py": "1 / 0\n", "reference.py": REFERENCE}, 9),
    "memory": ({"question.py": QUESTION, "reference.py": REFERENCE}, 10),            # a shipped question's name
    "config": ({"question.py": QUESTION, "reference.py": REFERENCE}, 11),            # shardlab.reference.config
    "untitled": ({"question.py": QUESTION, "reference.py": REFERENCE}, 12),         # no template.md.j2 (build)
    "twice": ({"question.py": TWICE, "reference.py": REFERENCE}, 13),                # part id 13.1 twice
    "samefunction": ({"question.py": SAME_FUNCTION, "reference.py": REFERENCE}, 14),  # two parts grade double
    "raises": ({"question.py": WORKED, "reference.py": RAISING, "template.md.j2": "x\n"}, 15),
    "undefined": ({"question.py": QUESTION, "reference.py": REFERENCE,
                   "template.md.j2": "fine\n{{{{ q.worked.nothing }}}}\n"}, 16),
    "noscenario": ({"question.py": GLOO, "reference.py": ""}, 17),                 # runs toy_run, no scenario.py
    "otherscenario": ({"question.py": GLOO, "reference.py": "", "scenario.py": SCENARIO.replace(
        "{scenario}", "toy_other")}, 18),
    "shadow": ({"question.py": GLOO, "reference.py": "", "scenario.py": SCENARIO.replace(
        "{scenario}", "fsdp_train")}, 19),                                           # a shipped scenario's name
    "fixturekey": ({"question.py": QUESTION, "reference.py": REFERENCE,
                    "submissions/typo/expect.toml": EXPECT["zeros"], "submissions/typo/fixturekey.py": ""}, 20),
    "fixturepart": ({"question.py": QUESTION, "reference.py": REFERENCE,
                     "submissions/wrong/expect.toml": EXPECT["no part"], "submissions/wrong/fixturepart.py": ""}, 21),
}
RENDERED = ("untitled", "raises", "undefined")          # what build does with them: render handout and solutions
FIXTURES_READ = ("fixturekey", "fixturepart")           # build reads their wrong submissions' expect.toml

SCRIPT = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from shardlab.autograder.core.errors import ShardlabError
    from shardlab.autograder.publish.render import render_markdown
    from shardlab.autograder.questions import questions, registered
    from shardlab.reference.config import load_config

    tmp, out = Path(sys.argv[1]), {}
    for name in sys.argv[2:]:
        try:
            cfg = load_config(tmp / f"{name}.toml")
            out[name] = {"numbers": [q.number for q in questions(cfg)]}
            if name in {rendered}:
                render_markdown(cfg, False)
                render_markdown(cfg, True)
            if name in {fixtures}:
                from shardlab.autograder.selfcheck import own_fixtures
                own_fixtures(cfg)
        except ShardlabError as exc:
            out[name] = {"error": str(exc)}
        except Exception as exc:                    # what a course question must never get: a traceback
            out[name] = {"crash": f"{type(exc).__name__}: {exc}"}
    shipped = load_config(None)
    out["shipped after"] = {"numbers": [q.number for q in questions(shipped)],
                            "registered": [q.number for q in registered()]}
    print(json.dumps(out))
''').replace("{rendered}", repr(RENDERED)).replace("{fixtures}", repr(FIXTURES_READ))


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("course_folders")
    for name, (files, number) in FOLDERS.items():
        folder = tmp / f"q_{name}" / name
        folder.mkdir(parents=True)
        for file, text in files.items():
            (folder / file).parent.mkdir(parents=True, exist_ok=True)
            (folder / file).write_text(text.format(name=name, number=number))
        (tmp / f"{name}.toml").write_text(f'[course]\nquestion_dirs = ["q_{name}"]\n')
    (tmp / "nowhere.toml").write_text('[course]\nquestion_dirs = ["no_such_folder"]\n')
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp), *FOLDERS, "nowhere"], capture_output=True,
                          text=True, timeout=300, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, json.loads(done.stdout.strip().splitlines()[-1])


def test_a_good_folder_joins_the_course_after_the_package_questions(loaded):
    _, out = loaded
    assert out["good"] == {"numbers": [1, 2, 3, 4, 5, 7]}


def test_the_shipped_course_never_gets_a_course_folder_question(loaded):
    _, out = loaded
    assert out["shipped after"]["numbers"] == [1, 2, 3, 4, 5]
    assert 7 in out["shipped after"]["registered"]          # known by part id to this process, set by no course


@pytest.mark.parametrize("name, words", [
    ("clash", ["part ids 2.1 are question 'fsdp''s already", "number the question past"]),
    ("nameless", ["no reference.py"]),
    ("broken", ["question.py failed to import: ZeroDivisionError: division by zero"]),
    ("memory", ["a question named 'memory' exists already: rename the folder"]),
    ("config", ["reference.py would be shardlab.reference.config, which the package defines already"]),
    ("untitled", ["no template.md.j2"]),
    ("twice", ["part id 13.1 is used twice"]),
    ("samefunction", ["parts 14.1 and 14.2 both grade samefunction.double"]),
    ("raises", ["reference.py line 8, in _half: ZeroDivisionError: division by zero"]),
    ("undefined", ["template.md.j2 line 2: 'dict object' has no attribute 'nothing'"]),
    ("noscenario", ["part 17.1 runs the scenario 'toy_run', but the folder has no scenario.py"]),
    ("otherscenario", ["part 18.1 runs the scenario 'toy_run', which scenario.py does not register "
                       "(it registers 'toy_other')"]),
    ("shadow", ["scenario.py", "'fsdp_train'", "a shipped scenario's name: rename it"]),
    ("fixturekey", ["submissions/typo/expect.toml has an unknown key 'zeros'"]),
    ("fixturepart", ["submissions/wrong/expect.toml names no part of this course: 99.1, 99.2"]),
])
def test_a_broken_folder_is_one_line_naming_it(loaded, name, words):
    tmp, out = loaded
    error = out[name].get("error", "")
    assert "\n" not in error and f"course question {tmp / f'q_{name}' / name}" in error, error
    for text in words:
        assert text in error, error


def test_a_question_folder_that_is_not_there_is_a_config_error(loaded):
    tmp, out = loaded
    assert out["nowhere"]["error"] == (f"config [course].question_dirs names 'no_such_folder', which is no folder "
                                       f"({tmp / 'no_such_folder'})")


def test_the_cli_says_it_in_one_line_with_status_2(loaded):
    tmp, _ = loaded
    done = run_cli("answers", "--config", str(tmp / "broken.toml"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("question.py failed to import: ZeroDivisionError: "
                                                         "division by zero")
