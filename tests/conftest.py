import shutil
from pathlib import Path

import pytest

from shardlab.reference.config import load_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def cfg():
    return load_config()


@pytest.fixture
def submission(tmp_path):
    """Build a submission folder: solutions/ copied to assignments/, with
    optional module sources replacing files."""
    def make(**modules: str) -> Path:
        shutil.copytree(REPO / "solutions", tmp_path / "assignments",
                        ignore=shutil.ignore_patterns("__pycache__"))
        for name, text in modules.items():
            (tmp_path / "assignments" / f"{name}.py").write_text(text)
        return tmp_path
    return make
