"""Every course-config snippet the docs show builds a course, and a network's or device's name is only
a label: which network is intra-node and which inter-node comes from the config key ([fsdp]
intra_network / inter_network), never from the name (docs/instructor-guide.md). Expected numbers are
derived here by hand from docs/spec.md's all-gather model, α · log2(p) + b · P_unit / β."""
import math
import re

import pytest

from shardlab.autograder.core import content
from shardlab.autograder.publish.render import render_markdown
from shardlab.reference.config import load_config

pytestmark = pytest.mark.pure

ROOT = content.folder("reference").parent
DOCS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "examples").glob("*/README.md"))]


def toml_snippets() -> list[tuple[str, str]]:
    """(where, text) of every ```toml block of the docs."""
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in re.finditer(r"^```toml\n(.*?)^```", text, re.S | re.M):
            line = text[:m.start()].count("\n") + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", m.group(1)))
    return found


def test_the_docs_show_config_snippets():
    assert len(toml_snippets()) >= 2       # the guide's own devices and networks, and its [variants]


@pytest.mark.parametrize("where, text", toml_snippets(), ids=[w for w, _ in toml_snippets()])
def test_every_config_snippet_of_the_docs_builds_a_course(tmp_path, where, text):
    path = tmp_path / "course.toml"
    path.write_text(text)
    cfg = load_config(path)
    assert "##" in render_markdown(cfg, False) and "##" in render_markdown(cfg, True)


def _course(tmp_path, text):
    path = tmp_path / "course.toml"
    path.write_text(text)
    return load_config(path)


# Unit = D · F = 16384 · 53248 = 872,415,232 parameters, b = 2 bytes: 1,744,830,464 bytes.
UNIT_BYTES = 16384 * 53248 * 2


@pytest.mark.parametrize("intra_name, inter_name", [
    ("inter-fast", "intra-slow"),       # names that say the opposite of their role
    ("IB-a", "IB-b"),                    # names sharing a prefix
    ("NVLink", "RoCE 200G"),             # names with no dash at all
])
def test_network_roles_come_from_the_config_key_not_the_name(tmp_path, intra_name, inter_name):
    cfg = _course(tmp_path, f'[network."{intra_name}"]\nalpha_seconds = 1e-6\nbeta_bytes_per_second = 4e11\n'
                            f'devices = 8\n[network."{inter_name}"]\nalpha_seconds = 1e-5\n'
                            f'beta_bytes_per_second = 2.5e10\ndevices = 32\n'
                            f'[fsdp]\nintra_network = "{intra_name}"\ninter_network = "{inter_name}"\n')
    from shardlab.reference.fsdp import worked
    w = worked(cfg)
    intra = 1e-6 * math.log2(8) + UNIT_BYTES / 4e11          # 3e-6 + 4.362 ms
    inter = 1e-5 * math.log2(32) + UNIT_BYTES / 2.5e10       # 5e-5 + 69.79 ms
    assert w["allgather_intra"].value == pytest.approx(intra, rel=1e-12)
    assert w["allgather_inter"].value == pytest.approx(inter, rel=1e-12)
    solutions = render_markdown(cfg, True)
    assert f"within a node the all-gather takes {intra * 1e3:.3f} ms" in solutions
    assert f"across nodes it takes {inter * 1e3:.3f} ms" in solutions
