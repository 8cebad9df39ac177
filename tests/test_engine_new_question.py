"""ARCHITECTURE.md's recipe "Adding a question", followed step by step on a
toy question 9 whose files live in a temporary folder laid out like the
repository (nothing is written into the repository):

    reference/toy.py            step 2: the reference, `bytes_of`, and `worked`
    questions/toy/__init__.py   step 3: QUESTION = Question(number=9, module="toy", ...), a folder
    solutions/toy.py            step 4: the solution with solution markers
    templates/questions/toy.md.j2   step 5: the handout partial

A subprocess (so this process's registry cache and sys.modules stay clean)
puts the folders on the packages' search paths, as if the files were in
reference/, autograder/questions/ and templates/, and reports what the one
definition drove: discovery, the stub, the plan, the handout, the starter
kit's public checks, the otter test cases, and the grades of the solution,
the stub and a submission with the known mistake.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.sandbox

REFERENCE = '''\
"""Question 9 — a toy: the bytes of a model's weights (the reference)."""
from shardlab.reference.derivation import Worked, gb, n


def bytes_of(params: int, bytes_per_param: int) -> int:
    """params weights of bytes_per_param bytes each."""
    return params * bytes_per_param


def worked(cfg) -> dict[str, Worked]:
    m = cfg.model
    params = 2 * m.d_model * m.d_ff * m.num_blocks
    total = bytes_of(params, 2)
    return {"weights": Worked("BF16 weights", "P · 2", f"{n(params)} · 2", total, gb(total))}
'''

QUESTION = '''\
"""Question 9 — a toy: the bytes of a model's weights."""
from shardlab.autograder.core.parts import EXACT_INT, function_part
from shardlab.autograder.questions import Question
from shardlab.reference import toy as ref


def _args(cfg, rng):
    yield dict(params=7, bytes_per_param=2), True, "BF16"
    yield dict(params=0, bytes_per_param=4), False, "edge case: no parameters"
    for _ in range(3):
        yield dict(params=rng.randint(1, 10**12), bytes_per_param=rng.choice([2, 4])), False, ""


QUESTION = Question(number=9, module="toy", title="Toy bytes", template="toy.md.j2", worked=ref.worked, parts=(
    function_part("9.1", "toy", "bytes_of", ref.bytes_of, 2, _args, compare=EXACT_INT,
                  misconceptions=(("bits", "counts bits, not bytes", lambda p, b: 8 * p * b),),
                  description="bytes of the weights"),
))
'''

SOLUTION = '''\
"""Question 9 — a toy."""


def bytes_of(params: int, bytes_per_param: int) -> int:
    """Task 9.1. Bytes of `params` weights stored in `bytes_per_param` bytes each."""
    # BEGIN SOLUTION
    return params * bytes_per_param
    # END SOLUTION
'''

TEMPLATE = '''\
## Question {{ q.number }} — {{ q.title }} ({{ '%g' % q.points }} points)

How many bytes do the weights of {{ cfg.model.name }} take in BF16?
{% if solutions %}{{ q.worked.weights.shown }}{% endif %}

{% include "part_list.md.j2" %}
'''

BITS = '''\
def bytes_of(params, bytes_per_param):
    return 8 * params * bytes_per_param
'''

SCRIPT = textwrap.dedent('''
    import json, sys
    from pathlib import Path

    tmp = Path(sys.argv[1])
    import shardlab.reference
    import shardlab.autograder.questions as registry
    from shardlab.autograder.publish import jinja
    shardlab.reference.__path__.append(str(tmp / "reference"))      # as if in reference/
    registry.__path__.append(str(tmp / "questions"))                 # as if in autograder/questions/
    jinja.TEMPLATES = [jinja.TEMPLATES, tmp / "templates"]           # as if in templates/ (no hook for this)

    from shardlab.autograder.engine.grading import grade_folder
    from shardlab.autograder.engine.plan import part_plan
    from shardlab.autograder.publish.otter_export import question_cases, test_file_source
    from shardlab.autograder.publish.render import render_markdown
    from shardlab.autograder.publish.starter import public_checks
    from shardlab.autograder.publish.stubs import make_stub
    from shardlab.reference.config import load_config

    cfg = load_config()
    toy = next(q for q in registry.questions() if q.module == "toy")
    stub = make_stub((tmp / "solutions" / "toy.py").read_text(), "toy")
    cases, expected = part_plan(cfg, "9.1")
    out = dict(numbers=[q.number for q in registry.questions()], stub=stub,
               plan=[[c.public, c.calls[0].args, e[0]] for c, e in zip(cases, expected)],
               worked=registry.answer_key(cfg)["9"]["weights"].value,
               handout=render_markdown(cfg, False), solutions=render_markdown(cfg, True),
               kit=public_checks(cfg)["9"],
               otter=[[c.id, c.points, c.hidden] for c in question_cases(toy, cfg)],
               otter_file=test_file_source("Question 9: Toy bytes", question_cases(toy, cfg)))

    # a course config that gives part 9.1 three points instead of two
    (tmp / "course.toml").write_text('[points]\\n"9.1" = 3\\n')
    graded = {}
    for name, source, config in (("solution", (tmp / "solutions" / "toy.py").read_text(), cfg),
                                 ("stub", stub, cfg), ("bits", sys.argv[2], cfg),
                                 ("solution_3_points", (tmp / "solutions" / "toy.py").read_text(),
                                  load_config(tmp / "course.toml"))):
        root = tmp / "submissions" / name
        (root / "assignments").mkdir(parents=True)
        (root / "assignments" / "toy.py").write_text(source)
        report = grade_folder(root, config, modules={"toy"})
        q = report.questions[0]
        graded[name] = dict(questions=[x.id for x in report.questions], score=q.score, max=q.max_score,
                            feedback=q.parts[0].feedback, internal=report.internal_errors)
    out["graded"] = graded
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def toy_question(tmp_path_factory):
    """What the subprocess reports about the toy question."""
    tmp = tmp_path_factory.mktemp("toy_question")
    for path, text in (("reference/toy.py", REFERENCE), ("questions/toy/__init__.py", QUESTION),
                       ("solutions/toy.py", SOLUTION), ("templates/questions/toy.md.j2", TEMPLATE)):
        (tmp / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp / path).write_text(text)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp), BITS], capture_output=True, text=True,
                          timeout=300, cwd=tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_registry_finds_the_new_module(toy_question):
    numbers = toy_question["numbers"]
    assert numbers[-1] == 9 and numbers == sorted(numbers) and numbers.count(9) == 1


def test_the_stub_is_generated_from_the_solution_with_the_task_id(toy_question):
    assert 'raise NotImplementedError("Task 9.1: bytes_of")' in toy_question["stub"]
    assert "return params * bytes_per_param" not in toy_question["stub"]
    assert "def bytes_of(params: int, bytes_per_param: int) -> int:" in toy_question["stub"]
    assert '"""Task 9.1. Bytes of `params` weights' in toy_question["stub"]


def test_the_engine_seeds_public_and_hidden_cases_and_the_reference_answers_them(toy_question):
    public = [(args, value) for is_public, args, value in toy_question["plan"] if is_public]
    assert public == [(dict(params=7, bytes_per_param=2), 14)]
    hidden = [(args, value) for is_public, args, value in toy_question["plan"] if not is_public]
    assert len(hidden) == 4 and hidden[0] == (dict(params=0, bytes_per_param=4), 0)
    assert all(value == args["params"] * args["bytes_per_param"] for args, value in hidden)


def test_the_handout_and_solutions_show_the_question_and_its_part_table(toy_question):
    for text in (toy_question["handout"], toy_question["solutions"]):
        assert "## Question 9 — Toy bytes (2 points)" in text
        assert "| 9.1 | `bytes_of` | 2 | bytes of the weights |" in text
    shown = f"{toy_question['worked']:,} bytes"
    assert shown in toy_question["solutions"] and shown not in toy_question["handout"]


def test_the_starter_kit_checks_the_public_case_and_names_the_mistake(toy_question):
    (check,) = toy_question["kit"]["9.1"]
    assert check["check"]["args"] == dict(params=7, bytes_per_param=2) and check["check"]["expected"] == 14
    assert check["check"]["mistakes"] == [[112, "counts bits, not bytes"]]


def test_the_otter_zip_gets_one_case_per_case_group(toy_question):
    # 2 points over the groups BF16 (public), the edge case and the other inputs (both hidden)
    assert toy_question["otter"] == [["9.1", pytest.approx(2 / 3), False], ["9.1", pytest.approx(2 / 3), True],
                                     ["9.1", pytest.approx(2 / 3), True]]
    assert "check_part(shardlab_submission, '9.1', 2)" in toy_question["otter_file"]


def test_the_solution_earns_full_marks_and_a_config_can_change_the_points(toy_question):
    solution = toy_question["graded"]["solution"]
    assert solution == dict(questions=["9"], score=2, max=2, feedback="All 5 cases passed.", internal=[])
    three = toy_question["graded"]["solution_3_points"]
    assert (three["score"], three["max"], three["feedback"]) == (3, 3, "All 5 cases passed.")


def test_the_stub_earns_nothing_and_is_told_what_to_implement(toy_question):
    stub = toy_question["graded"]["stub"]
    assert (stub["score"], stub["max"], stub["internal"]) == (0, 2, [])
    assert stub["feedback"] == ("All 5 cases failed: NotImplementedError: Task 9.1: bytes_of "
                                "(assignments/toy.py, line 8)")


def test_the_known_mistake_is_named(toy_question):
    bits = toy_question["graded"]["bits"]
    # counting bits still gets 0 parameters right: 1 of the 3 case groups, a third of 2 points
    assert (bits["score"], bits["max"]) == (pytest.approx(2 / 3), 2)
    assert bits["feedback"].startswith("4 of 5 cases failed, in 2 of 3 case groups (BF16; other inputs): 0.67 "
                                       "of 2 points. bytes_of(params=7, bytes_per_param=2): wrong value, "
                                       "expected 14, got 112 [BF16] — this counts bits, not bytes | a hidden case "
                                       "of bytes_of (other inputs): wrong value — this counts bits, not bytes")
