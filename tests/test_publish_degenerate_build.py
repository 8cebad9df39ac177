"""`shardlab build` on a course whose numbers make questions degenerate: one warning line per
question on stderr, and the build goes on (exit 0). What each warning says, and what the handout
and the solutions say instead, is in test_publish_degenerate_courses.py. In its own file because
a subprocess is the platform tier, and conftest allows a test one tier marker only."""
import pytest

from shardlab.autograder.questions import degeneracies
from shardlab.reference.config import load_config
from helpers import run_cli

pytestmark = pytest.mark.platform


def test_build_warns_of_each_degenerate_question_and_builds(tmp_path):
    # Three degenerate questions, derived by hand from docs/spec.md:
    # 1 (b) on a TPU v5e: act/2 = 126 · 4096 · (16384 + 53248) · 2 / 2 = 35,936,796,672 bytes >= 16e9,
    #   so (16P + act/2)/N + act/2 exceeds the device at every N;
    # 4 (b) with s = 100,000 bytes, w = 1e10 bytes/s, o = 50 µs: sqrt(s/(w·o)) = sqrt(0.2) = 0.45 < 1 bucket;
    # 5 on one stage: (p − 1)/(m + p − 1) = 0, no bubble and no boundary.
    path = tmp_path / "course.toml"
    path.write_text('[course]\nquestions = ["memory", "buckets", "pipeline"]\n[memory]\nfsdp_device = "TPU v5e"\n'
                    "[buckets]\nmodel_bytes = 100_000\n[pipeline]\nstages = 1\n")
    done = run_cli("build", "--config", str(path), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    found = degeneracies(load_config(path))
    assert warnings == [
        f"warning: question 1 (Memory accounting) is degenerate on this course: {found['memory']}; "
        "the handout and solutions say so",
        f"warning: question 4 (DDP gradient bucket sizes) is degenerate on this course: {found['buckets']}; "
        "the handout and solutions say so",
        f"warning: question 5 (Pipeline parallelism) is degenerate on this course: {found['pipeline']}; "
        "the handout and solutions say so"]
    assert "no FSDP degree fits one TPU v5e (16 GB)" in warnings[0] and "0.45 is below one bucket" in warnings[1]
    assert "With these numbers no N fits: explain why." in (tmp_path / "out" / "handout.md").read_text()
    assert "no FSDP degree fits" in (tmp_path / "out" / "solutions.md").read_text()
    assert (tmp_path / "out" / "starter-kit.zip").is_file()

