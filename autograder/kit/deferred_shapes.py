"""torch's symbolic-shapes module, imported only when something needs more of it than a plain size check.

A backward from a given gradient (`tensor.backward(grad)`, every pipeline stage's) checks the
gradient's shape in `torch.autograd._make_grads` with `expect_true(sym_eq(out.shape, grad.shape))`
from `torch.fx.experimental.symbolic_shapes`, whose import pulls in sympy: 487 modules, about 0.5 s
of CPU and about 35 MB. On plain integer shapes, as every eager CPU tensor has, both functions are a
plain comparison. `install()` puts a stand-in module under that name that does exactly that for
plain values and imports the real module the first time anything else is asked of it (another
name, or a symbolic value), answering from it from then on; so no process that does not use
symbolic shapes pays for sympy, and one that does gets torch's own module.
"""
from __future__ import annotations

import importlib
import sys
import types

NAME = "torch.fx.experimental.symbolic_shapes"


class _Deferred(types.ModuleType):
    """The stand-in (module docstring). Dunder names are not forwarded: the import system asks
    for `__path__`, `__spec__` and the like, and must not load the real module to learn them."""

    def __getattr__(self, name: str):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(_real(), name)


def _real() -> types.ModuleType:
    """torch's module, imported the first time (the stand-in leaves `sys.modules` first; a thread that
    asks while another imports it waits for that import, as `import` does)."""
    if isinstance(sys.modules.get(NAME), _Deferred):
        sys.modules.pop(NAME, None)
    return importlib.import_module(NAME)


def _plain_ints(x) -> bool:
    return type(x) is int or (isinstance(x, (tuple, list)) and all(type(v) is int for v in x))


def sym_eq(x, y):
    """torch's `sym_eq` (== on ints, element-wise on lists and tuples, False on different lengths)
    for plain ints; anything else is torch's own."""
    if _plain_ints(x) and _plain_ints(y) and isinstance(x, int) == isinstance(y, int):
        return x == y if isinstance(x, int) else len(x) == len(y) and all(a == b for a, b in zip(x, y))
    return _real().sym_eq(x, y)


def expect_true(a, skip: int = 0):
    """torch's `expect_true` for a plain bool (returns it); anything else is torch's own."""
    if type(a) is bool:
        return a
    return _real().expect_true(a, skip + 1)


def install() -> None:
    """Put the stand-in in place unless the real module is already imported: in `sys.modules`, and as its
    package's attribute, where `import torch.fx.experimental.symbolic_shapes` then finds it (an import
    sets that attribute only for a module it loads; the real module's import sets it again)."""
    if NAME in sys.modules:
        return
    package, _, leaf = NAME.rpartition(".")
    module = _Deferred(NAME, __doc__)
    vars(module).update(sym_eq=sym_eq, expect_true=expect_true)
    sys.modules[NAME] = module
    setattr(importlib.import_module(package), leaf, module)
