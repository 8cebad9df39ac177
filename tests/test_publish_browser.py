"""The HTML handout as a student sees it, in a real headless Chromium: the
math is typeset (MathML made at build time), the figures load from beside
the page, and nothing is fetched from the network (no script, no CDN).
`make test` installs Debian's Chromium first when it is missing (`make browser`)."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from shardlab.autograder.publish.render import write_handout

pytestmark = pytest.mark.platform
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND"]          # any network request would fail


def test_the_html_handout_renders_math_and_figures_offline(cfg, tmp_path):
    assert BROWSER, "Chromium is missing: run `make browser` (apt-get install chromium) first"
    write_handout(cfg, tmp_path)
    page = tmp_path / "handout.html"
    source = page.read_text()
    # nothing to fetch: the only URL is MathML's namespace name, which is never requested
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", source))
    assert urls <= {"http://www.w3.org/1998/Math/MathML"}, urls
    shot = tmp_path / "screenshot.png"
    done = subprocess.run([BROWSER, *FLAGS, "--window-size=1000,2600", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 50_000, done.stderr[-1000:]
    dom = subprocess.run([BROWSER, *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert dom.count("<math") >= 10                                   # typeset math, not $...$ text
    assert "$\\alpha" not in dom and "<code>\\" not in dom            # nothing left unconverted
    images = re.findall(r'<img src="([^"]+)" alt="([^"]+)"', dom)
    assert len(images) == 3 and all((tmp_path / src).is_file() for src, _ in images)


def test_the_html_solutions_show_every_figure(cfg, tmp_path):
    """The solutions page: the memory chart and the four diagrams to scale, all loaded from beside it."""
    from shardlab.autograder.publish.render import build
    assert BROWSER, "Chromium is missing: run `make browser` (apt-get install chromium) first"
    build(cfg, tmp_path)
    page = tmp_path / "solutions.html"
    dom = subprocess.run([BROWSER, *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    images = re.findall(r'<img src="([^"]+)" alt="([^"]+)"', dom)
    assert len(images) == 5 and all((tmp_path / src).is_file() for src, _ in images), images
    assert dom.count("<math") >= 30                                   # every derivation's formula typeset
    assert not re.search(r"\$[^$<]+\$", re.sub(r"<[^>]+>", "", dom))   # no raw $...$ left
    assert {src for src, _ in images} >= {          # their own folder: figures/ holds the students' only
        "solutions-figures/fsdp_timeline.png", "solutions-figures/mesh.png", "solutions-figures/ddp_buckets.png",
        "solutions-figures/bucket_overhead.png"}
