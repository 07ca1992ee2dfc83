"""`pcache report` through the CLI: the page's figures are lint's and replay's, it needs no
network, it stays small for large logs, and bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from pcache.divergence.causes import CAUSES
from tests.conftest import SAMPLES, run_pcache

PROMPTS = SAMPLES / "prompts"
MOONCAKE = SAMPLES / "traces" / "mooncake_tiny.jsonl"
REQUESTS_TRACE = SAMPLES / "traces" / "requests_tiny.jsonl"


class Page(HTMLParser):
    """What the tests read from a page: summary figures, links, scripts, table rows."""

    def __init__(self, text: str):
        super().__init__()
        self.figures: dict[str, str] = {}
        self.references: list[str] = []
        self.rows: dict[str, int] = {}
        self.tags: list[str] = []
        self._table: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        self.tags.append(tag)
        if "data-figure" in values:
            self.figures[values["data-figure"]] = values["data-value"]
        for name in ("src", "href", "xlink:href", "action", "data"):
            if name in values:
                self.references.append(values[name])
        if tag == "table":
            self._table.append(values.get("id", ""))
        if tag == "tr" and self._table:
            key = self._table[-1]
            self.rows[key] = self.rows.get(key, 0) + 1

    def handle_endtag(self, tag):
        if tag == "table" and self._table:
            self._table.pop()


@pytest.fixture(scope="module")
def samples_page(tmp_path_factory) -> tuple[str, dict]:
    folder = tmp_path_factory.mktemp("report")
    page = folder / "report.html"
    result = run_pcache("report", PROMPTS, "-o", page)
    assert result.returncode == 0, result.stderr.decode()
    lint = run_pcache("lint", PROMPTS, "--format", "json")
    assert lint.returncode == 1, lint.stderr.decode()
    return page.read_text(), json.loads(lint.stdout)


def test_summary_figures_are_lints(samples_page):
    text, lint = samples_page
    page = Page(text)
    summary = lint["summary"]
    for key in ("requests", "sessions", "prompt_tokens", "cacheable_ratio"):
        assert float(page.figures[key]) == pytest.approx(summary[key], abs=1e-6), key
    if_fixed = summary.get("if_fixed", {}).get("cacheable_ratio")
    if if_fixed is None:
        if_fixed = summary["cacheable_ratio_if_fixed_upper_bound"]
    assert float(page.figures["cacheable_ratio_if_fixed"]) == pytest.approx(if_fixed, abs=1e-6)
    ranked = sorted(summary["rules"], key=lambda rule: -rule["tokens_reprefilled"])
    top = re.findall(r'<li data-rule="(PC\d{3})">', text)
    assert top == [rule["code"] for rule in ranked[:3]]


def test_findings_table_lists_every_finding_and_rule(samples_page):
    text, lint = samples_page
    page = Page(text)
    assert page.rows["findings-table"] == len(lint["findings"]) + 1  # + the header row
    assert page.rows["rules"] == len(lint["summary"]["rules"]) + 1
    for finding in lint["findings"]:
        assert f'<tr data-rule="{finding["code"]}">' in text


def test_page_needs_no_network(samples_page):
    text, _ = samples_page
    page = Page(text)
    assert all(ref.startswith(("#", "url(#")) for ref in page.references), page.references
    assert "link" not in page.tags and "iframe" not in page.tags
    assert not re.search(r"https?:", text)
    assert "@import" not in text and "<script src" not in text


def test_json_is_the_data_behind_the_page(cli, samples_page):
    _, lint = samples_page
    result = cli("report", PROMPTS, "--format", "json", "-o", "-")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["lint"] == lint
    tree = data["tree"]
    assert tree["requests"] == lint["summary"]["requests"]
    points = tree["branch_points"]
    assert points and all(point["kind"] in CAUSES for point in points)
    # sess-a writes the clock into its system prompt: a branch point says so, where
    clock = [point for point in points if point["kind"] == "clock"]
    assert clock and clock[0]["b_path"] == "body.messages[0].content"
    assert "Current time" in clock[0]["b_excerpt"]
    assert data["replay"]["requests"] == lint["summary"]["requests"]
    assert len(data["per_request"]) == lint["summary"]["requests"]


def test_a_folder_of_logs_and_traces_reports_its_requests(cli):
    data = json.loads(cli("report", SAMPLES, "--format", "json", "-o", "-").stdout)
    requests = data["lint"]["summary"]["requests"]
    assert data["replay"]["requests"] == data["tree"]["requests"] == requests > 0
    left_out = "\n".join(data["skipped"])
    for name in ("mooncake_tiny.jsonl", "bailian_tiny.jsonl", "prompt_ids.json"):
        assert name in left_out


def _walk(node):
    yield node
    for child in node["children"]:
        yield from _walk(child)


def test_trace_report_shows_the_replays_figures(cli, tmp_path):
    page = tmp_path / "trace.html"
    result = cli("report", MOONCAKE, "-o", page)
    assert result.exit_code == 0, result.output
    replay = json.loads(cli("replay", MOONCAKE, "--format", "json").stdout)
    figures = Page(page.read_text()).figures
    assert float(figures["token_hit_rate"]) == pytest.approx(replay["token_hit_rate"], abs=1e-6)
    assert int(figures["requests"]) == replay["requests"]
    assert 'id="findings"' not in page.read_text()  # block ids carry no text to lint
    data = json.loads(cli("report", MOONCAKE, "--format", "json", "-o", "-").stdout)
    sweep = json.loads(cli("replay", MOONCAKE, "--capacity-sweep", "--format", "json").stdout)[
        "sweep"
    ]
    assert [r["token_hit_rate"] for r in data["sweep"]] == [r["token_hit_rate"] for r in sweep]


def test_replay_files_add_their_ttft_distributions(cli, tmp_path):
    outcomes = tmp_path / "per_request.jsonl"
    replay = cli("replay", REQUESTS_TRACE, "-o", outcomes, "--format", "json")
    assert replay.exit_code == 0, replay.output
    expected = json.loads(replay.stdout)
    page = tmp_path / "ttft.html"
    result = cli("report", REQUESTS_TRACE, "--replay", outcomes, "-o", page)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    row = re.search(r"<tr><td>predicted \([^)]*per_request\.jsonl\)</td>(.*?)</tr>", text, re.S)
    assert row, "the per-request file has its row in the TTFT table"
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
    assert float(cells[1]) == expected["ttft_ms"]["p50"]
    assert float(cells[4]) == expected["ttft_uncached_ms"]["p50"]


def test_a_measured_replay_sits_beside_the_prediction(cli, tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("pcache.replayer.engine.driver")
    outcomes = tmp_path / "measured.jsonl"
    replay = cli(
        "replay", REQUESTS_TRACE, "--engine", "cpu", "-m", "tiny", "-o", outcomes,
        "--format", "json",
    )  # fmt: skip
    assert replay.exit_code == 0, replay.output
    measured = json.loads(replay.stdout)
    page = tmp_path / "measured.html"
    result = cli("report", REQUESTS_TRACE, "--replay", outcomes, "-o", page)
    assert result.exit_code == 0, result.output
    row = re.search(
        r"<tr><td>measured \([^)]*measured\.jsonl\)</td>(.*?)</tr>", page.read_text(), re.S
    )
    assert row, "a file written by --engine is a measurement"
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
    assert float(cells[1]) == measured["ttft_ms"]["p50"]
    assert float(cells[4]) == measured["ttft_uncached_ms"]["p50"]
    lines = [json.loads(line) for line in outcomes.read_text().splitlines()]
    agreeing = sum(line["cached_tokens"] == line["predicted_cached_tokens"] for line in lines)
    assert cells[-1] == f"{agreeing} of {len(lines)}"


def test_a_calibration_file_predicts_on_the_measured_scale(cli, tmp_path):
    """The engine's fitted TTFT model, passed with --calibration, is the one the page's
    prediction uses: its TTFTs are those of `replay --simulate --calibration`."""
    pytest.importorskip("torch")
    pytest.importorskip("pcache.replayer.engine.driver")
    trace = tmp_path / "shared_prefix.jsonl"
    lines = (SAMPLES / "traces" / "shared_prefix.jsonl").read_text().splitlines()
    trace.write_text("\n".join(lines[:4]) + "\n")
    measured, saved = tmp_path / "measured.jsonl", tmp_path / "calibration.json"
    engine = cli(
        "replay", trace, "--engine", "cpu", "-m", "tiny", "--warmup", "1", "-o", measured,
        "--save-calibration", saved, "--format", "json",
    )  # fmt: skip
    assert engine.exit_code == 0, engine.output
    fitted = json.loads(saved.read_text())
    simulated_rows = tmp_path / "simulated.jsonl"
    simulated = cli(
        "replay", trace, "--simulate", "--calibration", saved, "-o", simulated_rows,
        "--format", "json",
    )  # fmt: skip
    assert simulated.exit_code == 0, simulated.output
    expected = json.loads(simulated.stdout)

    data = json.loads(
        cli("report", trace, "--calibration", saved, "--format", "json", "-o", "-").stdout
    )
    assert data["settings"]["ttft_model"] == fitted["model"] == expected["ttft_model"]
    described = data["settings"]["ttft_calibration"]
    assert described["source"] == str(saved)
    assert (described["engine_model"], described["device"]) == ("tiny", "cpu")
    assert described["date"] == fitted["date"]
    rows = [json.loads(line) for line in simulated_rows.read_text().splitlines()]
    for key in ("ttft_ms", "ttft_uncached_ms"):
        assert [row[key] for row in data["per_request"]] == [row[key] for row in rows]
        assert data["replay"][key] == expected[key]

    page = tmp_path / "calibrated.html"
    result = cli("report", trace, "--replay", measured, "--calibration", saved, "-o", page)
    assert result.exit_code == 0, result.output
    text = page.read_text()
    assert 'data-ttft-model="calibrated"' in text
    assert f"<code>{saved}</code>: model tiny (float32) on cpu" in text
    assert fitted["date"] in text
    row = re.search(r"<tr><td>predicted \(simulator, calibrated\)</td>(.*?)</tr>", text, re.S)
    assert row, "the calibrated prediction has its row in the TTFT table"
    cells = re.findall(r'<td class="num">([^<]*)</td>', row.group(1))
    assert float(cells[1]) == expected["ttft_ms"]["p50"]
    assert float(cells[4]) == expected["ttft_uncached_ms"]["p50"]
    assert re.search(r"<tr><td>measured \([^)]*measured\.jsonl\)</td>", text)

    default = tmp_path / "default.html"
    assert cli("report", trace, "--replay", measured, "-o", default).exit_code == 0
    text = default.read_text()
    assert 'data-ttft-model="default"' in text
    assert "<tr><td>predicted (simulator, default TTFT model)</td>" in text


@pytest.mark.parametrize("option", ["--replay", "--calibration"])
def test_a_fifo_is_refused_not_waited_on(option, tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    result = run_pcache("report", PROMPTS, option, fifo, cwd=Path(tmp_path), timeout=60)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert "pipe.jsonl: is a FIFO (named pipe)" in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


def test_large_log_is_folded_and_small(cli, tmp_path):
    trace = tmp_path / "chat.jsonl"
    synth = cli(
        "trace", "synth", "--workload", "chat", "-n", "3000", "--turns", "12",
        "--output-format", "hash-ids", "--seed", "3", "-o", trace,
    )  # fmt: skip
    assert synth.exit_code == 0, synth.output
    page = tmp_path / "large.html"
    result = cli("report", trace, "-o", page, "--sweep-points", "3")
    assert result.exit_code == 0, result.output
    assert page.stat().st_size < 400_000
    data = json.loads(
        cli("report", trace, "--format", "json", "-o", "-", "--sweep-points", "3").stdout
    )
    tree = data["tree"]
    assert tree["nodes_total"] > 1000 and tree["nodes_drawn"] <= 240
    assert tree["branches_folded"] > 0
    nodes = list(_walk(tree["root"]))
    for node in nodes:  # every request is in one band: children never hold more than parents
        assert sum(child["requests"] for child in node["children"]) <= node["requests"]
        for strip in node["strips"]:
            assert strip[1] >= node["start"]
        if node["folded"]:
            assert sum(requests for requests, _ in node["strips"]) == node["requests"]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("missing.jsonl",), "missing.jsonl: no such file or directory"),
        ((str(PROMPTS), "--replay", str(PROMPTS / "agent_log.jsonl")), "agent_log.jsonl:1:"),
        ((str(PROMPTS), "--profile", "nope"), "--profile must be one of"),
        ((str(PROMPTS), "--format", "pdf"), "--format must be html or json"),
        ((str(PROMPTS), "-o", "/nonexistent/dir/report.html"), "cannot write"),
        (
            (str(PROMPTS), "--calibration", str(PROMPTS / "agent_log.jsonl")),
            "agent_log.jsonl:2:1: invalid JSON",
        ),
        (
            (str(PROMPTS), "--calibration", str(SAMPLES / "a.json")),
            "not a TTFT calibration file",
        ),
        ((str(PROMPTS), "--calibration", "missing.json"), "missing.json: no such file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(arguments, message, tmp_path):
    result = run_pcache("report", *arguments, cwd=Path(tmp_path), timeout=60)
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert message in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
