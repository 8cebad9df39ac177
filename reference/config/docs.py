"""The config reference, docs/config.md, written from the declarations (`config.sections`): a table per
section, a row per key (its kind, unit, allowed range, default and help). tests/test_reference_config_docs.py
fails when the file and the declarations drift; write it again with

    .venv/bin/python -m shardlab.reference.config.docs > docs/config.md

With `--config COURSE` it documents that course's own questions' sections too (`config.own`).
"""
from __future__ import annotations

import inspect
from typing import Any

from shardlab.reference.config.course import CourseConfig
from shardlab.reference.config.fields import kind_of, range_of, unit_of
from shardlab.reference.config.renamed import Renamed
from shardlab.reference.config.sections import SECTIONS, TABLES, Section
from shardlab.reference.specs import Hardware, Network

HEAD = """# The course config, key by key

Generated from the declarations in `reference/config/sections.py` by
`python -m shardlab.reference.config.docs`; edit those, never this file
(a test fails when the two drift). How to use the file: the comments of
`reference/course.toml` and docs/instructor-guide.md. Numbers are finite:
NaN and the infinities are refused. `[points]` and `[variants]` are
described at the end.
"""

TAIL = """## [points]

`"<part id>" = x` sets one part's points; `<question> = total` scales that question's auto parts (after any
part overrides) so that its non-bonus parts sum to `total`. Each is a finite number >= 0.

## [variants]

Only with `[course] secret`: `section.key = [choices]` or `section.key = { min = .., max = .., step = .. }`
(numbers only) for a key of [model] or of a section of a question the course sets (a course's own question's
too), plus `model.ffn_ratio` (d_ff drawn as d_model times a ratio, rounded to a multiple of 128). Each value
is checked as its key's row above says. Without the section: d_model, d_ff and num_blocks within 25 % of the
course's.

## A course's own question

Its folder's `config.py` declares `SECTION`, a `Section` of its own keys, the same way: the course config's
`[<module>]` section (ARCHITECTURE.md, "A course's own question").
"""


def _default(value: Any) -> str:
    if value is None:
        return "absent"
    if value is ...:
        return "required"
    if isinstance(value, (Hardware, Network)):
        value = value.name
    if isinstance(value, tuple):
        return "[" + ", ".join(f'"{v}"' for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"' if isinstance(value, str) else repr(value)


def section_table(name: str, model: type[Section]) -> str:
    """One section's Markdown: its docstring's first line and a row per key."""
    what = inspect.cleandoc(model.__doc__ or "").splitlines()[0]
    lines = [f"## [{name}]", "", what.split("]: ", 1)[-1][:1].upper() + what.split("]: ", 1)[-1][1:], "",
             "| key | kind | unit | allowed | default | help |", "|---|---|---|---|---|---|"]
    for key, field in model.model_fields.items():
        default = "required" if field.is_required() else _default(field.default)
        cells = [f"`{key}`", kind_of(field), unit_of(field), range_of(field), f"`{default}`",
                 (field.description or "").replace("|", "\\|")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def earlier_names() -> str:
    """The `cfg` names of earlier releases that still answer (`config.renamed`), and today's."""
    lines = ["## Earlier `cfg` names", "",
             "An own question reads the course as `cfg.<section>.<key>`. These names of earlier releases still",
             "answer, and `shardlab build` says once which one a question used (ARCHITECTURE.md, \"The cfg",
             "contract\"):", "", "| earlier name | today's |", "|---|---|"]
    for owner in (CourseConfig, *SECTIONS.values()):
        for attr in vars(owner).values():
            if isinstance(attr, Renamed):
                lines.append(f"| `{attr.prefix}.{attr.old}` | `{attr.prefix}.{attr.new}` |")
    return "\n".join(lines) + "\n"


def reference(own: dict[str, type[Section]] | None = None) -> str:
    """docs/config.md, as the declarations say it; with `own`, a course's own questions' sections too
    ({module: Section}, after the package's)."""
    parts = [HEAD]
    parts += [section_table(name, model) for name, model in SECTIONS.items()]
    parts += [section_table(f'{name}."NAME"', model) for name, model in TABLES.items()]
    parts += [section_table(name, model) for name, model in (own or {}).items()]
    return "\n".join([*parts, TAIL, earlier_names()])


def main(argv: list[str] | None = None) -> None:
    """`python -m shardlab.reference.config.docs [--config COURSE]`: the reference, with that course's own
    questions' sections (their folders' config.py) among the tables."""
    import argparse

    from shardlab.autograder.core.errors import ShardlabError
    from shardlab.reference.config.course import load_config
    parser = argparse.ArgumentParser(prog="python -m shardlab.reference.config.docs")
    parser.add_argument("--config", help="a course config whose own questions' sections to include")
    args = parser.parse_args(argv)
    try:
        own = {name: type(section) for name, section in load_config(args.config).own} if args.config else {}
    except ShardlabError as error:
        raise SystemExit(f"error: {error}") from None
    print(reference(own), end="")


if __name__ == "__main__":
    main()
