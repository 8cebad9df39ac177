"""Where the grader keeps what it computes once per machine: the grading
secret behind every distributed run's data (autograder/sandbox/gloo/seeds.py)
and the expected values of reference runs that are too slow to repeat per
submission (the `fully_shard` agreement, reference/fsdp2_agreement.py).

The folder is `$SHARDLAB_CACHE_DIR` when set, else `$XDG_CACHE_HOME/shardlab`,
else `~/.cache/shardlab`. The Gradescope zip sets SHARDLAB_CACHE_DIR to a
folder inside `/autograder/source/`, which its setup.sh fills while the
image is built (`shardlab warm`), so every grading run starts warm whatever
HOME the container gives it. Only the grader's user may read it: the secret
and the expected values are part of the answer key.
"""
from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "SHARDLAB_CACHE_DIR"


def cache_dir() -> Path:
    """The cache folder (not created here)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "shardlab"
