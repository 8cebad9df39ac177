"""The starter kit as a student first sets it up (issue 28): unpacked into an
empty folder, installed into a fresh venv by the README's own install line,
then its `pytest` on the stubs (one line per failing task) and, with the
solutions in assignments/, its pytest again and its notebook executed by
that venv's Jupyter (`jupyter nbconvert --execute`).

The install line is the README's, but for PyTorch's CPU index, which this
machine cannot reach: `-c constraints.txt` pins the repo's torch instead, and
pip's own configuration finds that CPU build on local disk; everything else
comes from the package registry. Minutes of pip: the `slow` tier
(`make test-slow`), left out of `make test`."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.publish.render import render_markdown
from shardlab.autograder.publish.starter import build_starter_kit
from shardlab.autograder.publish.stubs import SOLUTIONS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

PYTORCH_CPU_INDEX = "--extra-index-url https://download.pytorch.org/whl/cpu"


def _run(command: str, cwd, env, timeout: float) -> subprocess.CompletedProcess:
    started = time.monotonic()
    done = subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    print(f"{time.monotonic() - started:6.1f} s  {command[:150]}")
    return done


def test_the_readme_install_line_gives_pytest_and_the_notebook(tmp_path, cfg):
    zipped = build_starter_kit(cfg, render_markdown(cfg, False), tmp_path)
    with zipfile.ZipFile(zipped) as zf:
        zf.extractall(tmp_path)
    kit = tmp_path / "starter-kit"
    readme = (kit / "README.md").read_text()
    install, first_test = re.search(r"```sh\n\s*(python3 -m venv .*)\n\s*(\.venv/bin/pytest)\n", readme).groups()
    assert PYTORCH_CPU_INDEX in install and "'.[notebook]'" in install
    install = (install.replace("python3 -m venv", f"{sys.executable} -m venv")
               .replace(PYTORCH_CPU_INDEX, f"-c {content.ROOT / 'constraints.txt'}"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"), JUPYTER_RUNTIME_DIR=str(tmp_path / "jupyter-run"),
               JUPYTER_CONFIG_DIR=str(tmp_path / "jupyter-config"), MPLBACKEND="Agg")

    installed = _run(install, kit, env, 1500)
    assert installed.returncode == 0, installed.stderr[-3000:]
    torch = _run(".venv/bin/python -c 'import torch; print(torch.__version__, torch.version.cuda)'", kit, env, 120)
    assert torch.stdout.split() == [f"{content.torch_version()}+cpu", "None"], torch.stdout + torch.stderr
    packages = _run(".venv/bin/pip list --format=json", kit, env, 120)
    names = {p["name"].lower() for p in json.loads(packages.stdout)}
    assert {"notebook", "ipykernel", "nbconvert", "pytest", "pytest-timeout", "matplotlib", "numpy"} <= names
    assert not any(n.startswith("nvidia") for n in names), sorted(names)

    stubs = _run(first_test, kit, env, 600)           # the README's second line, on the stubs
    lines = stubs.stdout.splitlines()
    assert stubs.returncode == 1 and "Traceback" not in stubs.stdout, stubs.stdout[-3000:]
    assert "tasks fail (the first failing case of each)" in stubs.stdout and len(lines) < 100, stubs.stdout
    print(f"pytest on the stubs: {len(lines)} lines; last: {lines[-1]}")

    shutil.rmtree(kit / "assignments")
    shutil.copytree(SOLUTIONS, kit / "assignments", ignore=shutil.ignore_patterns("__pycache__"))
    solved = _run(".venv/bin/pytest -q", kit, env, 600)
    assert solved.returncode == 0 and "failed" not in solved.stdout, solved.stdout[-3000:]
    executed = _run(".venv/bin/jupyter nbconvert --to notebook --execute handout.ipynb --output executed.ipynb "
                    "--ExecutePreprocessor.timeout=300 --ExecutePreprocessor.kernel_name=python3", kit, env, 1200)
    assert executed.returncode == 0, executed.stderr[-3000:]
    cells = [c for c in json.loads((kit / "executed.ipynb").read_text())["cells"] if c["cell_type"] == "code"]
    assert cells and all(c["execution_count"] for c in cells)
    outputs = [o for c in cells for o in c["outputs"]]
    assert not [o for o in outputs if o["output_type"] == "error"]
    printed = "".join("".join(o.get("text", "")) for o in outputs if o.get("name") == "stdout")
    assert "public checks passed" in printed and "public runs passed on local gloo ranks" in printed
    assert any("image/png" in o.get("data", {}) for o in outputs)        # a timeline drawn inline
