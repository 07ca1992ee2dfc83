"""The fleet grid's views: `replay --replicas ... --router ... --plot` and the report's fleet
section (`pcache report --replicas --router`), both from the replay's own `FleetSummary`."""

from __future__ import annotations

import re
import struct
from pathlib import Path

import orjson
import pytest

from tests.browser import find_chromium, load
from tests.conftest import run_pcache

TRACE = Path(__file__).parent / "data" / "mooncake" / "synthetic_head.jsonl"
GRID = ("--replicas", "1,2,4", "--router", "round-robin,sglang,precise")
BROWSER = find_chromium()


def grid_of_replay(cli) -> list[dict]:
    result = cli("replay", TRACE, *GRID, "-f", "json")
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)["sweep"]


def test_plot_draws_the_grid(cli, tmp_path):
    path = tmp_path / "grid.png"
    result = cli("replay", TRACE, *GRID, "--plot", path)
    assert result.exit_code == 0, result.output
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > height > 200
    assert "round-robin" in result.stdout  # the text grid is printed too


def test_plot_needs_a_sweep_or_replicas(cli, tmp_path):
    result = cli("replay", TRACE, "--plot", tmp_path / "x.png")
    assert result.exit_code == 2
    assert "--plot needs --capacity-sweep or --replicas" in result.output


def test_the_report_json_holds_the_replays_grid(cli):
    result = cli("report", TRACE, *GRID, "-f", "json", "-o", "-")
    assert result.exit_code == 0, result.output
    fleet = orjson.loads(result.stdout)["fleet"]
    replayed = grid_of_replay(cli)
    assert [entry["token_hit_rate"] for entry in fleet] == [
        entry["token_hit_rate"] for entry in replayed
    ]
    assert [(entry["router"], entry["num_replicas"]) for entry in fleet] == [
        (router, count) for router in ("round-robin", "sglang", "precise") for count in (1, 2, 4)
    ]
    assert [entry["router_precision"] for entry in fleet] == [
        entry["router_precision"] for entry in replayed
    ]


def test_no_fleet_section_unless_asked(cli, tmp_path):
    result = cli("report", TRACE, "-f", "json", "-o", "-")
    assert orjson.loads(result.stdout)["fleet"] == []
    page = tmp_path / "report.html"
    assert cli("report", TRACE, "-o", page).exit_code == 0
    assert 'id="fleet"' not in page.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--router", "sglang"), "need --replicas"),
        (("--replicas", "0"), "--replicas: each count"),
        (("--replicas", "2", "--router", "nope"), "nope"),
    ],
)
def test_bad_fleet_options_of_the_report_fail_in_one_line(cli, tmp_path, args, message):
    result = cli("report", TRACE, *args, "-o", tmp_path / "r.html")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.skipif(BROWSER is None, reason="no chromium installed")
def test_the_fleet_section_in_a_browser(tmp_path, cli):
    page = tmp_path / "report.html"
    result = run_pcache("report", TRACE, *GRID, "-o", page)
    assert result.returncode == 0, result.stderr.decode()
    loaded = load(BROWSER, page)
    assert loaded.console == []
    rows = re.findall(
        r'<tr data-router="([^"]+)" data-replicas="(\d+)" data-hit-rate="([^"]+)"'
        r' data-misrouted="([^"]+)"',
        loaded.dom,
    )
    replayed = grid_of_replay(cli)
    assert [(router, int(count)) for router, count, _, _ in rows] == [
        (entry["router"], entry["num_replicas"]) for entry in replayed
    ]
    for (_, _, hit_rate, misrouted), entry in zip(rows, replayed, strict=True):
        assert float(hit_rate) == pytest.approx(entry["token_hit_rate"], abs=1e-12)
        share = entry["router_precision"]["misrouted_share"]
        assert float(misrouted) == pytest.approx(share, abs=1e-12)
    assert 'aria-label="Token hit rate, load imbalance' in loaded.dom  # the chart is inline
    narrow = load(BROWSER, page, width=500, height=844)
    assert narrow.console == [] and narrow.scroll_width <= narrow.inner_width
