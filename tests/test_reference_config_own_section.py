"""A course's own question declares its own config section, in its folder (`config.py`,
`reference.config.own`): the course reads `[<module>]` as it reads the package's sections
(defaults, one-line errors naming the key), the question reads `cfg.<module>.<key>`, a
per-student variant may draw it, and the config reference documents it with `--config`.

The folders are loaded in a subprocess (this process's registry stays the package's).
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.platform, pytest.mark.timeout(900)]

CONFIG = '''\
from shardlab.reference.config.fields import Number, Whole, setting
from shardlab.reference.config.sections import Section


class ScaleSection(Section):
    """[scale]: the scale question's own numbers."""

    factor: Whole = setting(3, "what the course's example input is", unit="times", gt=0)
    rate: Number = setting(1e9, "a bandwidth the handout quotes", unit="bytes/s", gt=0)


SECTION = ScaleSection
'''
REFERENCE = 'def double(x: int) -> int:\n    return 2 * x\n'
QUESTION = '''\
from shardlab.autograder.core.parts import EXACT_INT, function_part
from shardlab.autograder.questions import Question
from shardlab.reference import scale as ref


def _args(cfg, rng):
    yield dict(x=cfg.scale.factor), True, "the course's own factor"


QUESTION = Question(number=31, module="scale", title="Scale", template="scale.md.j2", parts=(
    function_part("31.1", "scale", "double", ref.double, 1, _args, compare=EXACT_INT),
))
'''
FILES = {"config.py": CONFIG, "reference.py": REFERENCE, "question.py": QUESTION, "solution.py": "",
         "template.md.j2": "Double {{ cfg.scale.factor }} at {{ '%g' % cfg.scale.rate }} bytes/s.\n"}
COURSES = {
    "default": "",
    "set": "[scale]\nfactor = 5\nrate = 2.5e10\n",
    "zero": "[scale]\nfactor = 0\n",
    "nan": "[scale]\nrate = nan\n",
    "typo": "[scale]\nfactr = 5\n",
    "drawn": '[course]\nsecret = "s"\n[variants]\nscale.factor = [7, 8]\n',
    "badly drawn": '[course]\nsecret = "s"\n[variants]\nscale.factor = [7, 8.5]\n',
    "not set": '[course]\nsecret = "s"\nquestions = ["memory"]\n[variants]\nscale.factor = [7, 8]\n',
}

SCRIPT = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    from shardlab.autograder.core.errors import ShardlabError
    from shardlab.autograder.engine.plan import part_cases
    from shardlab.autograder.engine.variants import variant_config
    from shardlab.autograder.publish.render import render_markdown
    from shardlab.autograder.questions import questions
    from shardlab.reference.config import load_config

    out = {}
    for path in sys.argv[1:]:
        name = Path(path).stem
        try:
            cfg = load_config(path)
            questions(cfg)                          # loads the folder's question beside the package's
            got = {"factor": cfg.scale.factor, "rate": cfg.scale.rate,
                   "case": part_cases(cfg, "31.1")[0].calls[0].args}
            if name == "set":
                got["handout"] = render_markdown(cfg, False)
            if name == "drawn":
                got["drawn"] = sorted({variant_config(cfg, f"s{i}").scale.factor for i in range(20)})
            out[name] = got
        except ShardlabError as exc:
            out[name] = {"error": str(exc)}
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def read(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("own_section")
    folder = tmp / "questions" / "scale"
    folder.mkdir(parents=True)
    for file, text in FILES.items():
        (folder / file).write_text(text)
    paths = []
    for name, text in COURSES.items():
        path = tmp / f"{name}.toml"
        path.write_text('[course]\nquestion_dirs = ["questions"]\n' + text.replace("[course]\n", ""))
        paths.append(str(path))
    done = subprocess.run([sys.executable, "-c", SCRIPT, *paths], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp, json.loads(done.stdout)


def test_the_section_is_read_with_its_defaults_and_the_question_reads_it(read):
    _, out = read
    assert out["default"]["factor"] == 3 and out["default"]["rate"] == 1e9
    assert out["default"]["case"] == {"x": 3}
    assert out["set"]["factor"] == 5 and out["set"]["case"] == {"x": 5}
    assert "Double 5 at 2.5e+10 bytes/s." in out["set"]["handout"]


@pytest.mark.parametrize("name, error", [
    ("zero", "config [scale].factor must be positive, got 0"),
    ("nan", "config [scale].rate must be a finite number, got nan"),
    ("typo", "config has an unknown key [scale].factr (known: factor, rate)"),
    ("badly drawn", "config [variants] scale.factor[1] must be a whole number, got 8.5"),
    ("not set", "config [variants] scale.factor draws for question 'scale', which this course does not set"),
])
def test_its_errors_are_one_line_naming_the_key(read, name, error):
    _, out = read
    assert error in out[name]["error"] and "\n" not in out[name]["error"]


def test_a_variant_draws_it(read):
    _, out = read
    assert out["drawn"]["drawn"] == [7, 8]


def test_the_config_reference_documents_it(read):
    tmp, _ = read
    done = subprocess.run([sys.executable, "-m", "shardlab.reference.config.docs", "--config",
                           str(tmp / "default.toml")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "## [scale]" in done.stdout
    assert "| `factor` | integer | times | > 0 | `3` | what the course's example input is |" in done.stdout
