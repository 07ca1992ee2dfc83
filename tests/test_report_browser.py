"""The report of samples/ in a real headless Chromium: it loads with no console message and no
network, its summary figures in the DOM are lint's, it fits a 500 px window, and a screenshot
is taken. Skipped when no Chromium is installed (`.ci/run` installs Debian's)."""

from __future__ import annotations

import json
import re
import struct

import pytest

from tests.browser import find_chromium, load, screenshot
from tests.conftest import SAMPLES, run_pcache

BROWSER = find_chromium()
pytestmark = pytest.mark.skipif(BROWSER is None, reason="no chromium installed")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    folder = tmp_path_factory.mktemp("browser")
    path = folder / "report.html"
    result = run_pcache("report", SAMPLES, "-o", path)
    assert result.returncode == 0, result.stderr.decode()
    return path


def test_page_loads_clean_and_shows_lints_figures(page):
    loaded = load(BROWSER, page)
    assert loaded.console == []
    lint = json.loads(run_pcache("lint", SAMPLES, "--format", "json").stdout)
    figures = dict(re.findall(r'data-figure="([a-z_]+)" data-value="([^"]*)"', loaded.dom))
    for key in ("requests", "sessions", "prompt_tokens", "cacheable_ratio"):
        assert float(figures[key]) == pytest.approx(lint["summary"][key], abs=1e-6)
    assert re.search(r'id="shown"[^>]*>\d+ of \d+ shown<', loaded.dom)  # the filter script ran
    assert loaded.load_ms < 2000


def test_page_fits_a_narrow_window(page):
    """500 px: the narrowest window headless Chromium lays out (a phone held sideways)."""
    loaded = load(BROWSER, page, width=500, height=844)
    assert loaded.console == []
    assert loaded.scroll_width <= loaded.inner_width


def test_screenshot(page, tmp_path):
    output = tmp_path / "report.png"
    screenshot(BROWSER, page, output)
    width, height = struct.unpack(">II", output.read_bytes()[16:24])
    assert (width, height) == (1280, 1600)
