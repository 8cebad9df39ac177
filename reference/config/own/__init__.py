"""The config sections of a course's own questions.

A question folder (`core.course_folders`) may hold `config.py`, which
declares `SECTION`: a `config.sections.Section` whose fields are the keys of
the course config's `[<module>]` section, as the package's sections declare
theirs (`config.fields.setting`). It is loaded as
`shardlab.reference.config.own.<module>` before the question's other files,
so its reference and definition may import it; the course reads the section
as it reads the package's (checked, defaulted, one-line errors, drawable in
[variants]), and the question reads it as `cfg.<module>.<key>`. The config
reference documents the package's sections (docs/config.md); an own
section's help is its own, and `shardlab answers` shows its values.
"""
from __future__ import annotations

from pathlib import Path

from shardlab.autograder.core import course_folders
from shardlab.autograder.core.errors import ShardlabError

FILE = "config.py"
RESERVED = ("course", "model", "memory", "fsdp", "comm4d", "buckets", "pipeline", "grading", "gradescope",
            "points", "hardware", "network", "variants")     # the package's section names


def sections(question_dirs: tuple[str, ...]) -> dict[str, type]:
    """{question module: its declared Section} for every folder of `question_dirs` that has a config.py."""
    from shardlab.reference.config.sections import Section
    found: dict[str, type] = {}
    for folder in course_folders.question_folders(question_dirs):
        path = folder.file(FILE)
        if not path.is_file():
            continue
        where = f"course question {folder.path}"
        if folder.name in RESERVED:
            raise ShardlabError(f"{where}: its config section would be [{folder.name}], the package's: rename "
                                "the folder")
        module = course_folders.load(folder.module_name(FILE), path, Path(folder.path))
        section = getattr(module, "SECTION", None)
        if not (isinstance(section, type) and issubclass(section, Section)):
            raise ShardlabError(f"{where}: {FILE} defines no SECTION, a Section subclass (its [{folder.name}] "
                                "keys; shardlab.reference.config.sections)")
        found[folder.name] = section
    return found
