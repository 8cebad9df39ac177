"""The starter kit's distributed checks: the `kit` package, shipped whole as
`tests/shardlab_local/`, and the public runs it checks.

One source. The kit's ranks run the grader's scenarios, traced by the
grader's tracer, judged by the grader's comparators and worded by the
grader's verdicts; only the launcher differs (`kit.local`: subprocess ranks,
no walls, instead of the Linux fork server and its jails). The package is
copied file for file: it imports only itself (relative imports), the
standard library, torch, numpy and matplotlib, so it runs unchanged under
another name. `test_package_structure` checks that, and the build
refuses a kit file that imports shardlab by name.

Nothing that answers a question is in the package: no reference analytic
module, no solution. The public runs (`public_runs.json`) carry, for each
public case of a distributed part, the scenario call with its public seed,
the comparator's name, the expected value and the values the part's known
mistakes give, all computed here by the part's own `expect` inside
`seeds.public_seeds()` (the kit runs the public seed as is; a grading runs a
keyed seed the kit never sees). These are values the grader's feedback shows
for public cases anyway: the final weights of single-process training, of
PyTorch's own fully_shard, a storage budget, the bytes of each bucket.
"""
from __future__ import annotations

import re
from importlib import resources

from shardlab.autograder import kit
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.core.parts import alternatives
from shardlab.autograder.engine.plan import part_cases
from shardlab.autograder.kit.checks import name_of
from shardlab.autograder.questions import is_own, own_folder, questions
from shardlab.autograder.sandbox.gloo.seeds import public_seeds

KIT_PACKAGE = "shardlab_local"         # tests/shardlab_local/ in the kit

# The kit's two commands, run from its folder (`python tests/timelines.py`): tests/ is on
# their path, so they find the package.
LAUNCHERS = {
    "tests/timelines.py": ("Your timelines: one traced training step of each drawn task, on local gloo "
                           "ranks (writes timelines/)", "timelines.drawing"),
    "tests/bench_buckets.py": ("Question 4 (c)'s experiment: o and w of gloo all-reduces on this machine, "
                               "your own cost model, swept (writes bench/)", "bucket_experiment"),
}
LAUNCHER = '''"""{doc}. Run it from the kit's folder: python {path}"""
from {package}.{module} import main

if __name__ == "__main__":
    main()
'''

_SHARDLAB_IMPORT = re.compile(r"^\s*(?:from|import)\s+shardlab\b", re.M)


def harness_files(cfg=None) -> dict[str, str]:
    """Kit path -> text: every file of the `kit` package, the two launchers and, with a course config,
    its own questions' kit halves (a course folder's scenario.py and checks.py, as the kit's
    `scenarios/<name>.py` and `checks/<name>.py`)."""
    root = resources.files(kit)
    shipped = [(path, str(path).removeprefix(str(root)).lstrip("/")) for path in sorted(_python_files(root))]
    own = [(folder.file(file), dict(KIT_HALVES)[file].format(name=folder.name))
           for folder in _own_folders(cfg) for file, _ in KIT_HALVES if folder.file(file).is_file()]
    files = {}
    for path, relative in shipped + own:
        text = path.read_text(encoding="utf-8")
        if _SHARDLAB_IMPORT.search(text):
            raise ShardlabError(f"the starter kit cannot ship {path if (path, relative) in own else 'kit/' + relative}"
                                f": it imports shardlab by name (the kit package imports only itself, relatively)")
        files[f"tests/{KIT_PACKAGE}/{relative}"] = text
    for path, (doc, module) in LAUNCHERS.items():
        files[path] = LAUNCHER.format(doc=doc, path=path, package=KIT_PACKAGE, module=module)
    return files


# a course folder's kit halves and where the kit package holds them
KIT_HALVES = (("scenario.py", "scenarios/{name}.py"), ("checks.py", "checks/{name}.py"))


def _own_folders(cfg) -> list:
    """The course folders of the course's own questions (none without a config)."""
    if cfg is None:
        return []
    return [folder for q in questions(cfg) if is_own(q) and (folder := own_folder(q)) is not None]


def _python_files(folder):
    for entry in folder.iterdir():
        if entry.is_dir() and entry.name != "__pycache__":
            yield from _python_files(entry)
        elif entry.name.endswith(".py"):
            yield entry


def comparator_name(compare) -> str:
    """The name of a distributed part's comparator in the `kit.checks` package."""
    name = name_of(compare)
    if name is None:
        raise ShardlabError(f"a distributed part's comparator {compare!r} is not named in the kit.checks package, "
                            f"so the starter kit cannot check it")
    return name


def is_distributed(part) -> bool:
    """A part the grader runs on gloo ranks, and the kit on local ones."""
    return part.kind == "auto" and part.probe == "gloo"


def distributed_parts(cfg=None) -> list:
    """The distributed parts of the course's questions (all questions without a config)."""
    return [p for q in questions(cfg) for p in q.parts if is_distributed(p)]


def ranks_text(world_size: int) -> str:
    """How the kit runs a public run, as public_runs.json says it beside the run."""
    return (f"{world_size} local gloo ranks, one process each: the kit starts one group per world size "
            f"its runs use (any size the grader uses), once per pytest session, and every run of that size "
            f"shares it (tests/conftest.py, tests/{KIT_PACKAGE}/local_checks.py)")


def public_runs(cfg) -> dict[str, list[dict]]:
    """{question number: [one entry per public case of a distributed part]}; each entry:
    id, part, title, scenario, module, args (world_size included), call (as feedback
    shows it), note, ranks (how the kit runs it: `ranks_text`), compare (a comparator's
    name in kit.checks), expected, mistakes [[value, message]], and drawn (the part's
    `Drawn` as a dict, or None)."""
    out: dict[str, list[dict]] = {}
    with public_seeds():
        for q in questions(cfg):
            runs = out.setdefault(str(q.number), [])
            for part in filter(is_distributed, q.parts):
                for case in part_cases(cfg, part.id):
                    if not case.public:
                        continue
                    call = case.calls[0]
                    expected = part.expect(case)[0]
                    mistakes = [[values[0], mis.message]         # named as the grader would (`alternatives`)
                                for mis, values in alternatives(part.for_course(cfg), case, [expected])]
                    runs.append(dict(id=f"{part.id} {call.function} {case.note}", part=part.id, title=part.title,
                                     scenario=call.function, module=call.module, args=dict(call.args),
                                     call=call.show(), note=case.note, ranks=ranks_text(call.args["world_size"]),
                                     compare=comparator_name(part.compare),
                                     expected=expected, mistakes=mistakes,
                                     drawn=part.drawn._asdict() if part.drawn else None))
    return out
