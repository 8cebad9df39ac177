"""The sandbox's child side: the only place student code is imported.

Protocol: the parent writes one JSON request on stdin ({"root", "calls",
"result_fd", "memory_bytes"}) and reads JSON lines from the private result
pipe: {"importing": module}, {"start": i}, {"done": i, "value": ...} or
{"done": i, "error": ...}. The student's stdout and stderr go to a separate
pipe the parent caps and never parses, so printed "results" mean nothing.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import json
import os
import resource
import sys
import types

from shardlab.autograder.kit.student_values import describe_exception, plain

# Student code may not read the answer key or the grader.
BLOCKED = ("shardlab",)


class BlockAnswerKey(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"importing {name!r} is not allowed in a submission")
        return None


def load_submission_package(root: str) -> None:
    """Make `assignments` the submission's folder, whatever else is installed."""
    folder = os.path.join(root, "assignments")
    pkg = types.ModuleType("assignments")
    pkg.__path__ = [folder]
    pkg.__file__ = os.path.join(folder, "__init__.py")
    sys.modules["assignments"] = pkg
    sys.path[:0] = [root, folder]


def import_student_module(module: str):
    name = f"assignments.{module}"
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(sys.modules["assignments"].__path__[0], f"{module}.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"assignments/{module}.py is missing from the submission")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None     # a .py file that exists has both
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def lock_down(request: dict) -> str:
    """Everything between the trusted imports and the first student import:
    the walls (`jail`), rlimits, import blocking. Returns where
    the submission is seen from inside."""
    from shardlab.autograder.sandbox import jail
    jail.confine(request["root"], keep=(0, 1, 2, request["result_fd"]), namespaces=request["namespaces"])
    if request.get("memory_bytes"):
        limit = request["memory_bytes"]
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    sys.meta_path.insert(0, BlockAnswerKey())
    return jail.SUBMISSION if request["namespaces"] else request["root"]


def main() -> None:
    request = json.loads(sys.stdin.read())
    results = os.fdopen(request["result_fd"], "w", buffering=1)

    def send(**msg):
        results.write(json.dumps(msg) + "\n")

    load_submission_package(lock_down(request))

    failed_modules: dict[str, str] = {}
    for i, call in enumerate(request["calls"]):
        module, function, args = call["module"], call["function"], call["args"]
        if module in failed_modules:
            send(done=i, error=failed_modules[module])
            continue
        try:
            if f"assignments.{module}" not in sys.modules:
                send(importing=module)
            mod = import_student_module(module)
        except BaseException as exc:  # noqa: BLE001 - any failure of student code is a result
            failed_modules[module] = f"assignments/{module}.py failed to import: {describe_exception(exc)}"
            send(done=i, error=failed_modules[module])
            continue
        send(start=i)
        try:
            fn = getattr(mod, function, None)
            if not callable(fn):
                raise AttributeError(f"assignments/{module}.py has no function {function}")
            send(done=i, value=plain(fn(*args)))
        except BaseException as exc:  # noqa: BLE001
            send(done=i, error=describe_exception(exc))
    results.close()
    os._exit(0)  # skip interpreter teardown: student atexit hooks must not run after results


if __name__ == "__main__":
    main()
