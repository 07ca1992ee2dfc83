"""`--group-by KEY`: the summary per app, tenant, user or model, adding up to the whole."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pcache
from tests.conftest import run_pcache
from tests.fixtures.gateway_log import gateway_log

KEYS = ("model", "user", "file", "metadata.tenant", "metadata.app", "header.x-team")


def _write(path, seed: int, conversations: int = 6) -> None:
    lines = gateway_log(seed, conversations=conversations, turns=3)
    for number, line in enumerate(lines):
        line["headers"] = {"X-Team": f"team-{number % 3}"}
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def _sums(summary: dict) -> None:
    rows = summary["groups"]["rows"]
    for figure in ("requests", "prompt_tokens", "reusable_tokens", "reprefilled_tokens"):
        assert sum(row[figure] for row in rows) == summary[figure], figure
    assert sum(row["attributed_tokens"] for row in rows) == summary["attributed_tokens"]
    assert sum(row["unattributed_tokens"] for row in rows) == summary["unattributed_tokens"]
    for figure in ("prompt_tokens", "reusable_tokens"):
        fixed = sum(row["if_fixed"][figure] for row in rows)
        assert fixed == summary["if_fixed"][figure], figure
    for rule in summary["rules"]:
        grouped = [r for row in rows for r in row["rules"] if r["code"] == rule["code"]]
        assert sum(r["tokens_reprefilled"] for r in grouped) == rule["tokens_reprefilled"]
        assert sum(r["count"] for r in grouped) == rule["count"]
    lost = [row["reprefilled_tokens"] for row in rows]
    assert lost == sorted(lost, reverse=True)


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 1000),
    keys=st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True),
    profile=st.sampled_from(["vllm", "openai", "anthropic"]),
)
def test_groups_add_up_to_the_whole(tmp_path, seed, keys, profile):
    path = tmp_path / f"log-{seed}.jsonl"
    _write(path, seed)
    report = pcache.lint([str(path)], select=["ALL"], group_by=keys, profile=profile)
    summary = report.summary.as_dict()
    assert summary["groups"]["by"] == keys
    _sums(summary)


def test_group_by_app_from_the_config(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pcache.apps]\ndesk = ["metadata.app=zephdesk"]\nlookup = "model=gpt-4o-mini"\n'
    )
    _write(tmp_path / "log.jsonl", 3)
    done = run_pcache("lint", "log.jsonl", "--group-by", "app", "-f", "json", cwd=tmp_path)
    summary = orjson.loads(done.stdout)["summary"]
    names = {row["name"] for row in summary["groups"]["rows"]}
    assert names == {"app=desk", "app=lookup", "app=(other)"}
    _sums(summary)
    desk = next(row for row in summary["groups"]["rows"] if row["name"] == "app=desk")
    assert desk["rules"][0]["code"] == "PC101"  # its clock in the system prompt


def test_group_by_in_text_and_html(tmp_path):
    path = tmp_path / "log.jsonl"
    _write(path, 5)
    text = run_pcache("lint", path, "--group-by", "metadata.tenant").stdout.decode()
    assert "By metadata.tenant (2 groups, most re-prefilled first):" in text
    assert "metadata.tenant=northwind" in text and "metadata.tenant=contoso" in text
    page = tmp_path / "report.html"
    done = run_pcache("report", path, "--group-by", "model", "-o", page)
    assert done.returncode == 0, done.stderr.decode()
    html = page.read_text()
    assert 'id="groups-table"' in html and "model=gpt-4o-mini" in html


def test_group_values_redacted(tmp_path):
    path = tmp_path / "log.jsonl"
    _write(path, 5)
    done = run_pcache("lint", path, "--group-by", "user", "--redact", "-f", "json")
    rows = orjson.loads(done.stdout)["summary"]["groups"]["rows"]
    assert all(row["key"]["user"].startswith("<email #") for row in rows)
    assert "@" not in done.stdout.decode()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--group-by", "colour"), "--group-by unknown key 'colour'"),
        (("--group-by", "app"), "--group-by app: no [tool.pcache.apps] table"),
    ],
)
def test_bad_group_keys(tmp_path, arguments, message):
    path = tmp_path / "log.jsonl"
    _write(path, 1, conversations=2)
    done = run_pcache("lint", path, *arguments, cwd=tmp_path)
    assert done.returncode == 2
    error = done.stderr.decode()
    assert message in error and "Traceback" not in error and error.count("\n") == 1
