"""What the registry checks of a course's own question before any student is graded, each failure one
line naming the folder and the file (ARCHITECTURE.md, "A course's own question"):

- its part ids are unique, and no two parts grade the same function (the stub and the docstring of a
  graded function name one task id);
- the scenarios its gloo parts run are registered: by its own scenario.py, or shipped in the kit; and
  scenario.py takes no name the kit's scenarios have (`course_folders.load_folder` loads the kit's
  first, so such a name fails to register);
- an exception in its code (`worked`, `degenerate`, a part's case generator) is one line naming the
  file, the line and the function where it was raised (`guarded`), not a traceback.

Its template (`publish.jinja`) and its wrong submissions' expect.toml (`selfcheck.own_fixtures`) are
checked where they are read.
"""
from __future__ import annotations

import dataclasses
import functools
import random
import traceback
from collections import Counter
from pathlib import Path
from typing import Any, Callable

from shardlab.autograder.core import course_folders
from shardlab.autograder.core.errors import ShardlabError


def check_parts(where: str, parts) -> None:
    """Unique part ids; one part per graded function."""
    twice = sorted(pid for pid, count in Counter(p.id for p in parts).items() if count > 1)
    if twice:
        raise ShardlabError(f"{where}: part id {', '.join(twice)} is used twice: give each part its own id")
    graders: dict[tuple[str, str], list[str]] = {}
    for p in parts:
        if p.function and p.probe == "calls":
            graders.setdefault((p.module, p.function), []).append(p.id)
    for (module, function), ids in graders.items():
        if len(ids) > 1:
            raise ShardlabError(f"{where}: parts {' and '.join(ids)} both grade {module}.{function}: its stub and "
                                f"docstring name one task id, so give each part its own function")


def raised_where(exc: BaseException, folder: Path) -> str:
    """"file line N, in function: Type: message" for the innermost frame of `exc` in `folder`'s files."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename).parent == folder]
    text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
    what = f"{type(exc).__name__}{': ' + text if text else ''}"
    if not frames:
        return what
    last = frames[-1]
    return f"{Path(last.filename).name} line {last.lineno}, in {last.name}: {what}"


def _guard(fn: Callable | None, folder: Path) -> Callable | None:
    if fn is None:
        return None

    @functools.wraps(fn)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ShardlabError:
            raise
        except Exception as exc:  # noqa: BLE001 - instructor code: one line naming where it raised
            raise ShardlabError(f"course question {folder}: {raised_where(exc, folder)}") from None
    return guarded


def guarded(question, folder: Path):
    """The question with its `worked`, `degenerate` and parts' case generators reporting an exception as
    one line naming the folder, file, line and function (`raised_where`)."""
    parts = tuple(dataclasses.replace(p, cases=_guard(p.cases, folder)) for p in question.parts)
    return dataclasses.replace(question, worked=_guard(question.worked, folder),
                               degenerate=_guard(question.degenerate, folder), parts=parts)


def check_scenarios(folder: course_folders.QuestionFolder, question, cfg) -> None:
    """Every scenario the question's gloo parts run (each case's `Call.function`, on this course) is
    registered: by the folder's scenario.py, or shipped in the kit."""
    gloo = [p for p in question.parts if p.probe == "gloo"]
    if not gloo:
        return
    from shardlab.autograder.kit.scenarios import SCENARIOS, load_all
    load_all()
    own_module = folder.module_name(course_folders.SCENARIO)
    own = sorted(name for name, s in SCENARIOS.items() if type(s).__module__ == own_module)
    for p in gloo:
        for case in p.cases(cfg, random.Random(0)):
            for call in case.calls:
                if call.function in SCENARIOS:
                    continue
                where = f"course question {folder.path}: part {p.id} runs the scenario {call.function!r}"
                if not folder.file(course_folders.SCENARIO).is_file():
                    raise ShardlabError(f"{where}, but the folder has no scenario.py to register it")
                raise ShardlabError(f"{where}, which scenario.py does not register (it registers "
                                    f"{', '.join(map(repr, own)) or 'none'})")
