"""The `shardlab` command's entry point: `cli.main`, after starting a single
grading's zygote.

`shardlab grade PATH...` (one grading, not a batch: no --out, no
--gradescope-export) spends its first second in the zygote's torch import
(`sandbox.zygote`), which the gloo runs wait for. Started here, before the
CLI's own imports (click, rich, the course: about 0.1 s), that import runs
beside them instead of after them. `cli.grade` asks for the same zygote
(`zygote.shared()`); anything else, or a grading that stops early (a bad
option, a malformed course), only kills it again on the way out.
"""
from __future__ import annotations

import sys

BATCH_OPTIONS = ("--out", "--gradescope-export", "--help", "-h")   # no zygote of this process's


def _single_grading(args: list[str]) -> bool:
    return args[:1] == ["grade"] and not any(a.split("=")[0] in BATCH_OPTIONS for a in args)


def main() -> None:
    if _single_grading(sys.argv[1:]):
        from shardlab.autograder.sandbox import zygote
        try:
            zygote.shared()
        except OSError:                 # `cli.grade` asks again, and a failed start falls back there
            zygote.forget_shared()
    from shardlab.autograder.cli import main as cli_main
    cli_main()
