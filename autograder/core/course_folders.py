"""A course's own questions: one folder each, outside the package.

A course config names folders of them (`[course] question_dirs`, relative
to the config file). Every sub-folder of such a folder is one question,
named after its student module (`tp/` grades `assignments/tp.py`), and
holds the files a shipped question spreads over the package:

| file | what it is | known to the engine as |
|---|---|---|
| `question.py` | the definition, `QUESTION = Question(...)` | `shardlab.autograder.questions.<name>` |
| `reference.py` | the analytic answer key and `worked(cfg)` | `shardlab.reference.<name>` |
| `solution.py` | the answer key, with solution markers | `solutions/<name>.py` (stubs, `shardlab check`) |
| `template.md.j2` | the handout's and solutions' text | `templates/questions/<name>.md.j2` |
| `scenario.py` | a distributed part's scenario (optional) | `shardlab.autograder.kit.scenarios.<name>` |
| `checks.py` | a distributed part's comparators (optional) | `shardlab.autograder.kit.checks.<name>` |
| `submissions/<mistake>/` | wrong submissions as in tests/submissions/ (optional) | `shardlab check`'s |

The modules are loaded from their files under those names (`load`), so a
definition imports its reference as a shipped one does (`from
shardlab.reference import tp as ref`), relative imports in `scenario.py`
and `checks.py` reach the kit (`from . import Scenario, register`), and the
starter kit ships those two as `tests/shardlab_local/scenarios/<name>.py`
and `checks/<name>.py`. This module is the layout and the loading; the
registry (`questions`) decides what a folder must hold and what may not
collide.

Every module loaded here is recorded (`LOADED`): the gloo fork server is a
separate process, and the grader hands it the scenario files to import
before it forks a rank (`scenario_files`).
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from shardlab.autograder.core.errors import ShardlabError

# (file, the module name it is loaded as), in loading order: the kit's halves first (they import only
# the kit), then the reference, then the definition, which may import all three
MODULES = (
    ("config.py", "shardlab.reference.config.own.{name}"),
    ("checks.py", "shardlab.autograder.kit.checks.{name}"),
    ("scenario.py", "shardlab.autograder.kit.scenarios.{name}"),
    ("reference.py", "shardlab.reference.{name}"),
    ("question.py", "shardlab.autograder.questions.{name}"),
)
REQUIRED = ("question.py", "reference.py")        # a folder without them is no question
SOLUTION, TEMPLATE, FIXTURES, SCENARIO = "solution.py", "template.md.j2", "submissions", "scenario.py"
# what the otter zip carries of a folder: never the solution, nor the wrong submissions built on it
GRADER_FILES = ("config.py", "question.py", "reference.py", "scenario.py", "checks.py")

LOADED: dict[str, Path] = {}
"""Module name -> file, for every course module this process loaded."""


@dataclass(frozen=True)
class QuestionFolder:
    """One course question's folder; `name` is its student module's."""

    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    def file(self, name: str) -> Path:
        return self.path / name

    def module_name(self, file: str) -> str:
        return dict(MODULES)[file].format(name=self.name)

    def needed(self, file: str) -> Path:
        """The folder's `file`, or a one-line error naming the folder."""
        path = self.path / file
        if not path.is_file():
            raise ShardlabError(f"course question {self.path}: no {file} (ARCHITECTURE.md, \"Adding a question\")")
        return path


def question_folders(dirs) -> list[QuestionFolder]:
    """Every question folder in `dirs` ([course] question_dirs, absolute), by name; each holds
    question.py and reference.py, or the error names it."""
    found = []
    for given in dirs:
        for path in sorted(Path(given).iterdir()):
            if not path.is_dir() or path.name.startswith((".", "_")):
                continue
            folder = QuestionFolder(path)
            if not folder.name.isidentifier():
                raise ShardlabError(f"course question {path}: the folder's name is its student module's "
                                    f"(assignments/<name>.py), so it must be a Python identifier")
            for file in REQUIRED:
                folder.needed(file)
            found.append(folder)
    return found


def load_folder(folder: QuestionFolder) -> dict[str, ModuleType]:
    """Import the folder's modules (MODULES, those present) under their names, once per process:
    {file: module}. Nothing is loaded when one of the names is the package's own."""
    present = [(file, folder.module_name(file)) for file, _ in MODULES if folder.file(file).is_file()]
    if folder.file(SCENARIO).is_file():      # the kit's scenarios first: a name of theirs fails to register
        importlib.import_module("shardlab.autograder.kit.scenarios").load_all()
    for file, name in present:
        known = LOADED.get(name)
        if known == folder.file(file):
            continue
        importlib.import_module(name.rpartition(".")[0])
        if known is not None:
            raise ShardlabError(f"course question {folder.path}: {file} would be {name}, which {known.parent} "
                                f"loaded already: rename one of the folders")
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            raise ShardlabError(f"course question {folder.path}: {file} would be {name}, which the package "
                                f"defines already: rename the folder")
    return {file: load(name, folder.file(file), folder.path) for file, name in present}


def load(name: str, path: Path, folder: Path) -> ModuleType:
    """Import the file `path` as the module `name` (once per process); a failure is one line
    naming `folder`. The module's parent package is imported first, and the module is set on it."""
    if LOADED.get(name) == path:
        return sys.modules[name]
    parent, _, leaf = name.rpartition(".")
    package = importlib.import_module(parent)
    if name in sys.modules or importlib.util.find_spec(name) is not None:
        raise ShardlabError(f"course question {folder}: {path.name} would be {name}, which the package defines "
                            f"already: rename the folder")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ShardlabError(f"course question {folder}: {path.name} cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ShardlabError:
        del sys.modules[name]
        raise
    except BaseException as exc:  # noqa: BLE001 - instructor code: one line naming the folder
        del sys.modules[name]
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise ShardlabError(f"course question {folder}: {path.name} failed to import: "
                            f"{type(exc).__name__}{': ' + text[:300] if text else ''}") from None
    setattr(package, leaf, module)
    LOADED[name] = path
    return module


def scenario_files() -> list[tuple[str, str]]:
    """(module name, file) of every course scenario this process loaded: what the fork server imports."""
    prefix = dict(MODULES)["scenario.py"].format(name="")
    return [(name, str(path)) for name, path in LOADED.items() if name.startswith(prefix)]

