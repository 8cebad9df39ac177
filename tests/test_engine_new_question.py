"""ARCHITECTURE.md's recipe "Adding a question", followed end to end on a toy
question that lives in a temporary folder (nothing is written into the
repository): a question definition, a reference function, a solution with
solution markers. The question is discovered by the registry, its stub is
generated from the solution, the solution earns full marks, the stub none,
and a known mistake is named in the feedback."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.sandbox

QUESTION = '''\
"""Question 9 — a toy: the bytes of a model's weights."""
from shardlab.autograder.engine.parts import EXACT_INT, function_part
from shardlab.autograder.questions import Question


def weight_bytes(params: int, bytes_per_param: int) -> int:
    """The reference (it would live in reference/toy.py): params * bytes_per_param."""
    return params * bytes_per_param


def _args(cfg, rng):
    yield dict(params=7, bytes_per_param=2), True, "BF16"
    for _ in range(4):
        yield dict(params=rng.randint(1, 10**12), bytes_per_param=rng.choice([2, 4])), False, ""


QUESTION = Question(number=9, module="toy", title="Toy bytes", template="toy.md.j2", parts=(
    function_part("9.1", "toy", "weight_bytes", weight_bytes, 2, _args, compare=EXACT_INT,
                  misconceptions=(("bits", "counts bits, not bytes", lambda p, b: 8 * p * b),),
                  description="bytes of the weights"),
))
'''

SOLUTION = '''\
def weight_bytes(params: int, bytes_per_param: int) -> int:
    """Bytes of `params` weights stored in `bytes_per_param` bytes each."""
    # BEGIN SOLUTION
    return params * bytes_per_param
    # END SOLUTION
'''

SCRIPT = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    import shardlab.autograder.questions as registry
    registry.__path__.append(sys.argv[1])             # step 3: a module in questions/ is a question
    from shardlab.autograder.engine.grading import grade_folder
    from shardlab.autograder.publish.stubs import make_stub
    from shardlab.reference.config import load_config

    numbers = [q.number for q in registry.questions()]
    stub = make_stub(Path(sys.argv[2]).read_text(), "toy")      # step 4: `shardlab stubs`
    roots = {}
    bits = "def weight_bytes(params, bytes_per_param):\\n    return 8 * params * bytes_per_param\\n"
    for name, body in (("solution", Path(sys.argv[2]).read_text()), ("stub", stub), ("bits", bits)):
        root = Path(sys.argv[3]) / name
        (root / "assignments").mkdir(parents=True)
        (root / "assignments" / "toy.py").write_text(body)
        report = grade_folder(root, load_config(), modules={"toy"})
        q = report.questions[0]
        roots[name] = dict(question=q.id, score=q.score, max=q.max_score, feedback=q.parts[0].feedback)
    print(json.dumps(dict(numbers=numbers, stub=stub, reports=roots)))
''')


def test_a_toy_question_added_by_the_recipe_is_found_stubbed_and_graded(tmp_path):
    questions = tmp_path / "questions"
    questions.mkdir()
    (questions / "toy.py").write_text(QUESTION)
    solution = tmp_path / "solution_toy.py"
    solution.write_text(SOLUTION)
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(questions), str(solution), str(tmp_path / "subs")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["numbers"] == [1, 2, 3, 4, 9]
    assert 'raise NotImplementedError("Task 9.1: weight_bytes")' in out["stub"]
    assert "return params * bytes_per_param" not in out["stub"]
    solution, stub, bits = (out["reports"][k] for k in ("solution", "stub", "bits"))
    assert (solution["question"], solution["score"], solution["max"]) == ("9", 2, 2)
    assert solution["feedback"] == "All 5 cases passed."
    assert stub["score"] == 0 and "NotImplementedError" in stub["feedback"] and "Task 9.1" in stub["feedback"]
    assert bits["score"] == 0
    assert "weight_bytes(params=7, bytes_per_param=2): wrong value, expected 14, got 112" in bits["feedback"]
    assert "this counts bits, not bytes" in bits["feedback"]
