"""The starter kit's distributed checks: the grader's own rank-side code,
shipped as the package `tests/shardlab_local/`, and the public runs it checks.

One source. The kit's ranks run the grader's scenarios
(sandbox/gloo/ranks/scenarios/), traced by the grader's tracer, judged by the
grader's comparators (kit/checks/__init__.py), with failures worded by the
grader's verdict.py; only the launcher differs (kit/local.py:
subprocess ranks, no walls, instead of the Linux fork server and its jails).
Each module in `SHIPPED` is copied verbatim but for its imports, which are
renamed from `shardlab.…` to the kit's names; the build refuses a shipped
module that would import anything else of shardlab, and
tests/test_publish_kit_harness.py fails if a kit file is not exactly the
rewritten source.

Nothing that answers a question is shipped: no reference analytic module, no
solution. The public runs (`public_runs.json`) carry, for each public case of
a distributed part, the scenario call with its public seed, the comparator's
name, the expected value and the values the part's known mistakes give, all
computed here by the part's own `expect` inside `seeds.public_seeds()` (the
kit runs the public seed as is; a grading runs a keyed seed the kit never
sees). These are values the grader's feedback shows for public cases anyway:
the final weights of single-process training, of PyTorch's own fully_shard,
a storage budget, the bytes of each bucket.
"""
from __future__ import annotations

import inspect
import re
from importlib import import_module

from shardlab.autograder.kit import checks as run_checks
from shardlab.autograder.engine.plan import part_cases
from shardlab.autograder.core.errors import ShardlabError
from shardlab.autograder.questions import questions
from shardlab.autograder.sandbox.gloo.seeds import public_seeds

KIT_PACKAGE = "shardlab_local"         # tests/shardlab_local/ in the kit
_G = "shardlab.autograder"

# grader module -> its name in the kit (tests/ is on the kit's pytest path)
SHIPPED = {
    f"{_G}.engine.comparison": "shardlab_check",
    f"{_G}.engine.rank_comparison": f"{KIT_PACKAGE}.rank_comparison",
    f"{_G}.engine.run_checks": f"{KIT_PACKAGE}.run_checks",
    f"{_G}.sandbox.student_values": f"{KIT_PACKAGE}.student_values",
    f"{_G}.sandbox.gloo.verdict": f"{KIT_PACKAGE}.verdict",
    f"{_G}.sandbox.gloo.local": f"{KIT_PACKAGE}.local",
    f"{_G}.sandbox.gloo.local_checks": f"{KIT_PACKAGE}.local_checks",
    f"{_G}.sandbox.gloo.ranks.tracing": f"{KIT_PACKAGE}.tracing",
    f"{_G}.sandbox.gloo.ranks.scenarios": f"{KIT_PACKAGE}.scenarios",
    f"{_G}.sandbox.gloo.ranks.scenarios.ddp": f"{KIT_PACKAGE}.scenarios.ddp",
    f"{_G}.sandbox.gloo.ranks.scenarios.fsdp": f"{KIT_PACKAGE}.scenarios.fsdp",
    f"{_G}.sandbox.gloo.ranks.scenarios.comm4d": f"{KIT_PACKAGE}.scenarios.comm4d",
    f"{_G}.sandbox.gloo.ranks.scenarios.pipeline": f"{KIT_PACKAGE}.scenarios.pipeline",
    f"{_G}.publish.timeline": f"{KIT_PACKAGE}.timeline",
    f"{_G}.publish.pipeline_timeline": f"{KIT_PACKAGE}.pipeline_timeline",
    f"{_G}.publish.kit_timelines": "timelines",          # tests/timelines.py: `python tests/timelines.py`
    f"{_G}.bench.buckets_ranks": f"{KIT_PACKAGE}.bench_ranks",
    f"{_G}.bench.buckets": "bench_buckets",              # tests/bench_buckets.py: Q4(c)'s experiment
    "shardlab.autograder.kit.toy_models": f"{KIT_PACKAGE}.toy_models",
    "shardlab.autograder.kit.comm4d_mesh": f"{KIT_PACKAGE}.comm4d_mesh",
}

PACKAGE_README = '''"""The grader's own code for the distributed checks, copied by `shardlab build`.

Every module here but this one is a file of the autograder, verbatim except
for its imports: the scenarios your code runs in (scenarios/), the tracing of
torch.distributed (tracing.py), the rules that judge a run (run_checks.py,
rank_comparison.py, and ../shardlab_check.py) and the words for a hang
(verdict.py). Only the launcher is the kit's own way of starting ranks
(local.py: one process per rank, no sandbox). Do not edit them: the
autograder uses its own copies.
"""
'''

_IMPORT = re.compile(r"^(\s*)(from|import)\s+(shardlab(?:\.\w+)*)", re.M)


def _kit_path(name: str, is_package: bool) -> str:
    return "tests/" + name.replace(".", "/") + ("/__init__.py" if is_package else ".py")


def rewrite(source: str, origin: str) -> str:
    """`source` of module `origin` with every shardlab import renamed to the kit's; a
    ShardlabError for an import of a module the kit does not ship."""
    def rename(m: re.Match) -> str:
        name = m.group(3)
        if name not in SHIPPED:
            raise ShardlabError(f"the starter kit cannot ship {origin}: it imports {name}, which is "
                                f"not among the kit's modules (publish/kit_harness.SHIPPED)")
        return f"{m.group(1)}{m.group(2)} {SHIPPED[name]}"
    return _IMPORT.sub(rename, source)


def harness_files() -> dict[str, str]:
    """Kit path -> text of every shipped module (and the package's own __init__)."""
    files = {f"tests/{KIT_PACKAGE}/__init__.py": PACKAGE_README}
    for origin, name in SHIPPED.items():
        module = import_module(origin)
        files[_kit_path(name, hasattr(module, "__path__"))] = rewrite(inspect.getsource(module), origin)
    return files


def comparator_name(compare) -> str:
    """The name of a distributed part's comparator in kit/checks/__init__.py."""
    for name, value in vars(run_checks).items():
        if name.isupper() and value is compare:
            return name
    raise ShardlabError(f"a distributed part's comparator {compare!r} is not named in kit/checks/__init__.py, "
                        f"so the starter kit cannot check it")


def is_distributed(part) -> bool:
    """A part the grader runs on gloo ranks, and the kit on local ones."""
    return part.kind == "auto" and part.probe == "gloo"


def distributed_parts(cfg=None) -> list:
    """The distributed parts of the course's questions (all questions without a config)."""
    return [p for q in questions(cfg) for p in q.parts if is_distributed(p)]


def public_runs(cfg) -> dict[str, list[dict]]:
    """{question number: [one entry per public case of a distributed part]}; each entry:
    id, part, title, scenario, module, args (world_size included), call (as feedback
    shows it), note, compare (a name in run_checks), expected, mistakes [[value, message]]."""
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
                    mistakes = [[mis.alt(case)[0], mis.message] for mis in part.misconceptions]
                    runs.append(dict(id=f"{part.id} {call.function} {case.note}", part=part.id, title=part.title,
                                     scenario=call.function, module=call.module, args=dict(call.args),
                                     call=call.show(), note=case.note, compare=comparator_name(part.compare),
                                     expected=expected, mistakes=mistakes))
    return out
