"""Load a page in headless Chromium (Debian's `chromium`): its console, its DOM, a screenshot.

The network is unreachable to the browser (every host resolves to nothing), so a page that
needed a CDN would show it. A copy of the page gets a load hook that writes, into the DOM,
the milliseconds from navigation to the load event (layout forced) and the document's width
against the window's, which `--dump-dom` then returns.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
_PROBE = """<script>
window.addEventListener("load", function () {
  var body = document.body, height = body.offsetHeight;
  body.setAttribute("data-probe-load-ms", String(performance.now()));
  body.setAttribute("data-probe-scroll-width", String(document.documentElement.scrollWidth));
  body.setAttribute("data-probe-inner-width", String(window.innerWidth));
  body.setAttribute("data-probe-height", String(height));
});
</script>"""
_CONSOLE = re.compile(r":CONSOLE[^\]]*\] (.*)")


def find_chromium() -> str | None:
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@dataclass(slots=True)
class Loaded:
    console: list[str]
    dom: str
    load_ms: float
    scroll_width: int
    inner_width: int


def _flags(profile: str, width: int, height: int) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-extensions",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        f"--window-size={width},{height}",
    ]


def load(browser: str, page: Path, width: int = 1280, height: int = 900) -> Loaded:
    """The page's console messages and DOM after load, at a window of `width` px."""
    with tempfile.TemporaryDirectory() as folder:
        probed = Path(folder) / page.name
        probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>", 1))
        result = subprocess.run(
            [
                browser,
                *_flags(f"{folder}/profile", width, height),
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                probed.as_uri(),
            ],
            capture_output=True,
            timeout=90,
        )
    stderr = result.stderr.decode(errors="replace")
    assert result.returncode == 0, stderr[-2000:]
    dom = result.stdout.decode()
    probe = dict(re.findall(r'data-probe-([a-z-]+)="([^"]*)"', dom))
    assert probe, f"the load hook did not run:\n{stderr[-2000:]}"
    return Loaded(
        console=_CONSOLE.findall(stderr),
        dom=dom,
        load_ms=float(probe["load-ms"]),
        scroll_width=int(probe["scroll-width"]),
        inner_width=int(probe["inner-width"]),
    )


def screenshot(browser: str, page: Path, output: Path, width: int = 1280, height: int = 1600):
    """A PNG of the page's first `height` px at a window of `width` px."""
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run(
            [
                browser,
                *_flags(f"{folder}/profile", width, height),
                f"--screenshot={output}",
                page.resolve().as_uri(),
            ],
            capture_output=True,
            timeout=90,
        )
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
