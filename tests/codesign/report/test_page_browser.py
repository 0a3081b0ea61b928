"""The sweep report's index.html as a person sees it: rendered by headless Chromium (Debian's
`chromium`, installed by `make chromium`; skipped with the reason where it is absent). The page
is served over HTTP beside a small checking page that loads it in a frame of the same origin
and writes what it found (title, tables, every image's natural size) into its own DOM, which
`chromium --dump-dom` prints once the page and its scripts are done."""

from __future__ import annotations

import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from codesign.report.build import build_report

from .test_build import evaluate_with_layers, store, tiny_space  # noqa: F401  (fixtures)

BROWSER = next((b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
# CI (`.ci/run`) sets this: there the browser must be present and the test must run, never skip.
REQUIRED = os.environ.get("CODESIGN_REQUIRE_BROWSER") == "1"
pytestmark = pytest.mark.skipif(BROWSER is None and not REQUIRED,
                                reason="no headless Chromium: `make chromium` installs "
                                "Debian's chromium package (apt-get install -y chromium)")


def test_browser_present_where_required() -> None:
    """Where CI asks for the browser, its absence fails here instead of skipping the page test."""
    assert BROWSER is not None, "CODESIGN_REQUIRE_BROWSER=1 but no chromium on PATH: `make chromium` failed"

# loads each page named in FRAMES in a frame of its own and reports, per page, what it found
CHECK_PAGE = """<!doctype html><html><body><pre id="result">pending</pre>
<script>
const FRAMES = %s;
const found = {};
for (const src of FRAMES) {
  const frame = document.createElement("iframe");
  frame.style.width = "1200px"; frame.style.height = "900px";
  frame.addEventListener("load", () => {
    const doc = frame.contentDocument;
    found[src] = {title: doc.title, h1: (doc.querySelector("h1") || {}).textContent,
                  images: [...doc.images].map(i => ({src: i.getAttribute("src"), complete: i.complete,
                                                     width: i.naturalWidth, height: i.naturalHeight})),
                  tables: [...doc.querySelectorAll("table")].map(t => t.rows.length)};
    if (Object.keys(found).length === FRAMES.length)
      document.getElementById("result").textContent = "RESULT" + JSON.stringify(found) + "END";
  });
  frame.src = src;
  document.body.appendChild(frame);
}
</script></body></html>
"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A folder served over HTTP on a free local port, and its base URL."""
    folder = tmp_path / "site"
    folder.mkdir()
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield folder, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def render(folder: Path, url: str, pages: list[str], profile: Path) -> dict:  # type: ignore[type-arg]
    """What the checking page found on each of `pages` (paths under `folder`, served at `url`),
    after one headless Chromium loaded them."""
    assert BROWSER is not None
    (folder / "check.html").write_text(CHECK_PAGE % json.dumps(pages))
    done = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={profile}", "--virtual-time-budget=20000", "--dump-dom",
                           f"{url}/check.html"], capture_output=True, text=True, timeout=120)
    found = re.search(r"RESULT(.*?)END", done.stdout, re.S)
    assert found, f"the page did not report (exit {done.returncode}): {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1)))  # type: ignore[no-any-return]


def test_the_report_page_loads_with_every_image_and_its_table(store, served, tmp_path):  # noqa: F811
    folder, url = served
    summary = build_report(store, folder / "report", top=3)
    # the same report with a figure missing: the check must see it unresolved
    broken = shutil.copytree(folder / "report", folder / "broken")
    (broken / "effects.png").unlink()
    seen = render(folder, url, ["report/index.html", "broken/index.html"], tmp_path / "profile")
    page = seen["report/index.html"]
    assert page["title"] == page["h1"] == "Sweep tiny-test"
    figures = [Path(f).name for f in summary.files if f.endswith(".png")]
    assert sorted(i["src"] for i in page["images"]) == sorted(figures) and len(figures) >= 4
    for image in page["images"]:
        assert image["complete"] and image["width"] > 100 and image["height"] > 100, image
    assert page["tables"] == [1 + len(summary.best)]  # the heading row and one row per best design
    unresolved = [i["src"] for i in seen["broken/index.html"]["images"] if i["width"] == 0]
    assert unresolved == ["effects.png"]
