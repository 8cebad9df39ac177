"""The stand-in for torch's symbolic-shapes module (`kit.deferred_shapes`) answers as torch does.

Its two functions are checked against torch's own on plain values and on values they must hand
on (nested lists, bools, an int against a tuple, a non-bool); a fresh interpreter then shows that
a backward from a given gradient, the one use the zygote's warm-up makes, leaves sympy unimported
and raises torch's own words on a wrong shape, and that anything else asked of the module
(another name) brings in the real one, as `import` would have.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from shardlab.autograder.core.parts import Call
from shardlab.autograder.kit import deferred_shapes
from shardlab.autograder.sandbox.gloo.launch import run_gloo
from shardlab.autograder.sandbox.process import Limits, run_calls
from helpers import module_submission

real = pytest.importorskip("torch.fx.experimental.symbolic_shapes")

PAIRS = [(3, 3), (3, 4), (0, 0), ((2, 3), (2, 3)), ((2, 3), (3, 2)), ((2, 3), (2, 3, 1)), ([], ()),
         (torch.Size([4, 5]), torch.Size([4, 5])), (torch.Size([4, 5]), (4, 6)), ([1, 2], (1, 2)),
         ([[1, 2], [3]], [[1, 2], [3]]), ([[1, 2], [3]], [[1, 2], [4]]), (True, 1), ((True,), (1,))]
WRONG = [(3, (3,)), ((3,), 3), (1.5, 1.5), ("a", "a")]


def _outcome(fn, *args):
    try:
        return "value", fn(*args)
    except Exception as exc:  # noqa: BLE001 - the kind of failure is what is compared
        return "raised", type(exc).__name__


@pytest.mark.pure
@pytest.mark.parametrize("x, y", PAIRS + WRONG)
def test_sym_eq_answers_as_torchs(x, y):
    ours, theirs = _outcome(deferred_shapes.sym_eq, x, y), _outcome(real.sym_eq, x, y)
    assert ours == theirs
    if ours[0] == "value":
        assert type(ours[1]) is type(theirs[1])


@pytest.mark.pure
@pytest.mark.parametrize("a", [True, False, 1, 0, None, "yes", torch.tensor(True)])
def test_expect_true_answers_as_torchs(a):
    ours, theirs = _outcome(deferred_shapes.expect_true, a), _outcome(real.expect_true, a)
    assert ours[0] == theirs[0]
    if ours[0] == "value":
        assert ours[1] is theirs[1]
    else:
        assert ours[1] == theirs[1]


FRESH = r"""
import json, sys, torch
from torch import nn
if sys.argv[1] == "stand-in":
    from shardlab.autograder.kit import deferred_shapes
    deferred_shapes.install()
name = "torch.fx.experimental.symbolic_shapes"
torch.manual_seed(0)
model = nn.Linear(4, 3)
out = model(torch.randn(2, 4))
out.backward(torch.ones_like(out))
right = model.weight.grad.tolist()
try:
    out = model(torch.randn(2, 4))
    out.backward(torch.ones(3, 2))
    wrong = None
except RuntimeError as exc:
    wrong = str(exc)
after_backward = "sympy" in sys.modules
module = sys.modules[name]
quiet = not hasattr(module, "__path__") and "sympy" not in sys.modules
import torch.fx.experimental.symbolic_shapes
walked = torch.fx.experimental.symbolic_shapes.ShapeEnv.__name__      # through the package's attribute
from torch.fx.experimental.symbolic_shapes import ShapeEnv
print(json.dumps({"right": right, "wrong": wrong, "sympy": after_backward, "quiet": quiet,
                  "real": type(sys.modules[name]).__name__ == "module" and hasattr(sys.modules[name], "ShapeEnv"),
                  "shape_env": ShapeEnv.__name__, "walked": walked,
                  "parent": torch.fx.experimental.symbolic_shapes is sys.modules[name]}))
"""


def _fresh(mode: str) -> dict:
    done = subprocess.run([sys.executable, "-c", FRESH, mode], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.sandbox
def test_a_backward_from_a_given_gradient_needs_no_sympy_and_says_what_torch_says():
    torchs, ours = _fresh("torch"), _fresh("stand-in")
    assert torchs["sympy"] and not ours["sympy"]            # torch's own import brings sympy; the stand-in does not
    assert ours["right"] == torchs["right"]                 # the same gradient, to the bit
    assert ours["wrong"] == torchs["wrong"] and "Mismatch in shape" in ours["wrong"]
    assert ours["quiet"]                                     # the import system's dunder questions load nothing
    assert ours["real"] and ours["shape_env"] == "ShapeEnv"  # another name: the real module, for good
    assert ours["walked"] == "ShapeEnv" and ours["parent"]   # `import a.b.c` then a.b.c.X, as with torch's own


@pytest.mark.sandbox
def test_the_zygotes_warm_up_leaves_sympy_out():
    code = ("import sys; from shardlab.autograder.sandbox.gloo.ranks.main import preload; preload(); "
            "print('sympy' in sys.modules)")
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"


SHAPES_USER = '''
import torch


def backward_then_sympy():
    """A backward from a given gradient (the stand-in's), then torch's real module and sympy itself."""
    x = torch.ones(2, 3, requires_grad=True)
    (x * 3).backward(torch.ones(2, 3))
    import torch.fx.experimental.symbolic_shapes as shapes
    import sympy
    return [x.grad.sum().item(), shapes.ShapeEnv.__name__, str(sympy.Integer(6) / 4)]
'''


@pytest.mark.sandbox
def test_student_code_that_wants_the_real_module_gets_it_inside_the_walls(tmp_path):
    """A jailed process forked from the zygote can still import torch's module and sympy itself: the walls
    let it read them, as they let it read torch. (Whether the zygote has them already depends on what it
    was asked for before: a `fully_shard` reference rank's preload imports them, `zygote.PRELOADS`; the
    fresh interpreters above are where their absence is checked.)"""
    root = str(module_submission(tmp_path, "shapes", SHAPES_USER))
    want = [18.0, "ShapeEnv", "3/2"]
    plain = run_calls(root, [Call("shapes", "backward_then_sympy", {})], Limits(call_seconds=60, import_seconds=60))
    assert plain.outcomes[0].error is None, plain.outcomes[0].error
    assert plain.outcomes[0].value == want
    call = Call("shapes", "run_function", {"world_size": 2, "function": "backward_then_sympy", "args": []})
    ranks = run_gloo(root, [call]).outcomes[0]
    assert ranks.error is None, ranks.error
    assert [r["value"] for r in ranks.value] == [want, want]
