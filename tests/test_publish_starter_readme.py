"""The starter kit's README and pyproject.toml (publish/starter.py, issue 28):
the README names every question of the course, its title line included, on
the shipped course and on the second one (questions 1, 4 and 5); one install
line brings the notebook's Jupyter too, pinning nothing but the course's
torch; a task is selected by its marker. The kit's pytest, its notebook and
the install itself run in tests/test_publish_starter_kit.py and, in a fresh
venv, tests/test_publish_kit_fresh_venv.py (slow)."""
import re
import tomllib

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.publish.starter import KIT_PYPROJECT, kit_readme
from shardlab.autograder.questions import questions
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

A100 = content.folder("reference") / "courses" / "a100.toml"


@pytest.fixture(scope="module", params=["shipped", "a100"])
def course(request, cfg):
    return cfg if request.param == "shipped" else load_config(A100)


def test_the_readme_names_every_question(course):
    readme = kit_readme(course, {})
    title, _, intro = readme.splitlines()[:3]
    assert title == f"# {course.course.assignment} — starter kit"
    qs = questions(course)
    assert [q.number for q in qs] == ([1, 2, 3, 4, 5] if course.sha256 == load_config().sha256 else [1, 4, 5])
    for q in qs:
        assert f"{q.number} ({q.title})" in intro and f"Question {q.number}, {q.title}" in readme
    # the title line too: each question's subject, in the course's own words
    subjects = {"memory": "memory", "fsdp": "fsdp", "comm4d": "4d", "buckets": "buckets", "pipeline": "pipeline"}
    assert all(subjects[q.module] in title.lower() for q in qs), title


def test_one_install_line_brings_the_notebook_and_a_task_runs_alone(course):
    readme = kit_readme(course, {})
    assert ("python3 -m venv .venv && .venv/bin/pip install -e '.[notebook]' "
            "--extra-index-url https://download.pytorch.org/whl/cpu\n") in readme
    assert ".venv/bin/jupyter notebook handout.ipynb" in readme and "`handout.html`" in readme
    assert "pytest -m task_1_1` runs task 1.1's tests alone" in readme and "pytest -k 1.3" not in readme


def test_the_kit_pins_only_the_course_s_torch():
    project = tomllib.loads(KIT_PYPROJECT.format(name="kit", torch=content.torch_version()))["project"]
    pin = re.search(r"^torch==([\w.]+)", (content.ROOT / "constraints.txt").read_text(), re.M).group(1)
    assert f"torch=={pin}" in project["dependencies"]
    notebook = project["optional-dependencies"]["notebook"]
    assert {"notebook", "ipykernel", "nbconvert"} <= set(notebook)
    unpinned = [d for d in project["dependencies"] + notebook if not d.startswith("torch")]
    assert not any("==" in d or "<" in d for d in unpinned), unpinned          # lower bounds only (pytest>=8)


def test_the_readme_says_pytest_is_the_check_and_otter_check_is_not(course):
    """Students check their work with the kit's pytest; `otter check` is named as not supported
    (docs/gradescope.md says the same), so nobody tries it and reads a traceback."""
    readme = kit_readme(course, {})
    assert "These tests are how you check your work" in readme
    assert "`otter check` is not supported" in readme
