"""The HTML handout and solutions as a reader sees them, in a real headless
Chromium: the math is typeset (MathML made at build time, laid out by the
browser: a superscript sits above its base), tables keep their cells (a `|`
in a formula does not split one), the figures load from beside the page, and
the page asks the network for nothing (no script, no CDN). `make test`
installs Debian's Chromium first when it is missing (`make browser`).

The page is checked as shipped, plus a copy with a probe script appended
(test only): after the load event it writes what the browser laid out and
every resource the page requested (Resource Timing lists failed requests
too: a page that asked a CDN fails here even with every host unresolvable).
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from shardlab.autograder.publish.diagrams import document_figures
from shardlab.autograder.publish.render import write_handout
from shardlab.autograder.questions import all_parts

pytestmark = pytest.mark.platform
BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--host-resolver-rules=MAP * ~NOTFOUND"]          # any network request would fail

PROBE = """<script>
addEventListener('load', () => {
  const maths = [...document.querySelectorAll('math')];
  const raised = [...document.querySelectorAll('msup')].map(s => {
    const [base, sup] = s.children;
    return sup.getBoundingClientRect().top < base.getBoundingClientRect().top - 1; });
  const rows = [...document.querySelectorAll('tr')];
  document.body.setAttribute('data-probe', JSON.stringify({
    math: maths.length, laid_out: maths.filter(m => m.getBoundingClientRect().width > 0).length,
    msup: raised.length, raised: raised.filter(x => x).length,
    cells: rows.map(r => r.children.length),
    pipe_rows: rows.filter(r => r.textContent.includes('|w|')).map(r => r.children.length),
    requested: performance.getEntriesByType('resource').map(e => e.name),
    images: [...document.images].map(i => [i.getAttribute('src'), i.getAttribute('alt'), i.naturalWidth])}));
});
</script>"""


def _tolerance_rows() -> list[int]:
    """The part table's rows whose description holds the tolerance's |w| (4.5's, 2.7's, ...):
    each must keep its 4 cells."""
    return [4] * sum("|w|" in p.description for p in all_parts())


def _probe(page: Path) -> dict:
    """What Chromium laid out and requested for `page` (a probed copy beside it)."""
    probed = page.with_name(page.stem + "-probe.html")
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run([BROWSER, *FLAGS, "--dump-dom", probed.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    found = re.search(r'data-probe="([^"]*)"', dom)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def _check_page(page: Path, min_math: int) -> dict:
    assert BROWSER, "Chromium is missing: run `make browser` (apt-get install chromium) first"
    source = page.read_text()
    # nothing to fetch: the only URL is MathML's namespace name, which is never requested
    urls = set(re.findall(r"https?://[^\s\"'<>)]+", source))
    assert urls <= {"http://www.w3.org/1998/Math/MathML"}, urls
    assert "<script" not in source
    assert "<code>\\" not in source                   # no formula the converter gave up on (formats.mathml)
    seen = _probe(page)
    assert seen["requested"] == [], seen["requested"]                  # no request left the page
    assert seen["math"] >= min_math and seen["laid_out"] == seen["math"]
    assert seen["msup"] >= 2 and seen["raised"] == seen["msup"]         # typeset, not a row of text
    assert set(seen["cells"]) == {4}                                    # every table row whole
    assert all(width > 0 for _, _, width in seen["images"])            # every figure loaded
    assert all(alt for _, alt, _ in seen["images"])
    return seen


def test_the_html_handout_renders_math_and_figures_offline(cfg, tmp_path):
    write_handout(cfg, tmp_path)
    page = tmp_path / "handout.html"
    seen = _check_page(page, min_math=10)
    assert seen["pipe_rows"] == _tolerance_rows()         # 2.7, 4.5, ...: the tolerance's |w| in its cell
    assert len(seen["images"]) == len(document_figures(cfg, False))
    dom = subprocess.run([BROWSER, *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert "$\\alpha" not in dom and "<code>\\" not in dom          # nothing left unconverted
    shot = tmp_path / "screenshot.png"
    done = subprocess.run([BROWSER, *FLAGS, "--window-size=1000,2600", f"--screenshot={shot}", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.is_file() and shot.stat().st_size > 50_000, done.stderr[-1000:]


def test_the_html_solutions_show_every_figure(cfg, tmp_path):
    """The solutions page: every derivation's formula typeset, the memory chart and every
    diagram to scale, all loaded from beside it."""
    from shardlab.autograder.publish.render import build
    assert BROWSER, "Chromium is missing: run `make browser` (apt-get install chromium) first"
    build(cfg, tmp_path)
    page = tmp_path / "solutions.html"
    seen = _check_page(page, min_math=30)
    assert seen["pipe_rows"] == _tolerance_rows()
    images = [(src, alt) for src, alt, _ in seen["images"]]
    diagrams = document_figures(cfg, True)
    assert len(images) == 1 + len(diagrams) and all((tmp_path / src).is_file() for src, _ in images), images
    dom = subprocess.run([BROWSER, *FLAGS, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert not re.search(r"\$[^$<]+\$", re.sub(r"<[^>]+>", "", dom))   # no raw $...$ left
    assert {src for src, _ in images} >= {          # their own folder: figures/ holds the students' only
        f"solutions-figures/{name}.png" for name in diagrams}


def test_the_probe_sees_a_network_request_and_unset_math(tmp_path):
    """The checks above can fail: a page that loads a CDN's script is seen asking for it, and
    math left as text has no superscript to raise."""
    assert BROWSER, "Chromium is missing: run `make browser` (apt-get install chromium) first"
    page = tmp_path / "cdn.html"
    page.write_text('<html><body><p>$x^2$</p><script src="https://cdn.example.org/mathjax.js"></script>'
                    '</body></html>')
    seen = _probe(page)
    assert seen["requested"] == ["https://cdn.example.org/mathjax.js"]
    assert seen["math"] == 0 and seen["msup"] == 0
