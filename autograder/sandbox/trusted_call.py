"""A grader function run in a child of the zygote (`zygote.call_in_child`), or afresh as
`python -m shardlab.autograder.sandbox.trusted_call MODULE FUNCTION KWARGS`: it prints
`MODULE.FUNCTION(**KWARGS)` as one JSON line. Only the reference's and the kit's modules
(CALLABLE): grader code, never a module a submission could name."""
from __future__ import annotations

import importlib
import json
import sys
import warnings

CALLABLE = ("shardlab.reference.", "shardlab.autograder.kit.")


def check_callable(module: str) -> None:
    if not module.startswith(CALLABLE):
        raise ValueError(f"{module} is not grader code a child may run")


def main() -> None:
    warnings.simplefilter("ignore")         # torch's notes are not the result
    module, function, kwargs = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    check_callable(module)
    print(json.dumps(getattr(importlib.import_module(module), function)(**kwargs)), flush=True)


if __name__ == "__main__":
    main()
