"""Parquet and CSV tables of request bodies (pyarrow, the `tables` extra), through the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pcache.prompt.reading.held import requests_from
from tests.bad_input.checks import assert_one_line_error

pa = pytest.importorskip("pyarrow")
parquet = pytest.importorskip("pyarrow.parquet")
csv = pytest.importorskip("pyarrow.csv")

CHAT = Path(__file__).resolve().parent / "data" / "shapes" / "chat.jsonl"


def _table(lines: list[str]):
    return pa.table({"id": list(range(len(lines))), "note": ["-"] * len(lines), "body": lines})


@pytest.fixture
def tables(tmp_path) -> dict[str, Path]:
    table = _table(CHAT.read_text().splitlines())
    paths = {"parquet": tmp_path / "log.parquet", "csv": tmp_path / "log.csv"}
    parquet.write_table(table, paths["parquet"], row_group_size=2)
    csv.write_csv(table, paths["csv"])
    return paths


def _lint(cli, path):
    result = cli("lint", path, "--format", "json")
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_a_table_lints_as_its_jsonl(cli, tables, kind):
    expected, found = _lint(cli, CHAT), _lint(cli, tables[kind])
    assert found["summary"]["prompt_tokens"] == expected["summary"]["prompt_tokens"]
    assert found["summary"]["reusable_tokens"] == expected["summary"]["reusable_tokens"]
    header = 1 if kind == "csv" else 0  # a CSV row's line is its line in the file
    assert [(f["code"], f["tokens_reprefilled"], f["line"]) for f in found["findings"]] == [
        (f["code"], f["tokens_reprefilled"], f["line"] + header) for f in expected["findings"]
    ]


def test_the_column_can_be_named_and_a_wrong_name_says_which_exist(cli, tables):
    path = tables["parquet"]
    assert len(requests_from(f"{path}#body")) == 5
    result = cli("replay", f"{path}#nope", "--simulate")
    assert_one_line_error(result, "has no column 'nope' (columns: id, note, body)")
    report = json.loads(cli("replay", f"{path}#body", "--simulate", "--format", "json").stdout)
    assert report["requests"] == 5 and report["observed_cached_tokens"] == 288


def test_a_bad_cell_names_its_row_and_column(cli, tmp_path):
    lines = CHAT.read_text().splitlines()
    lines[2] = lines[2][:40]
    path = tmp_path / "bad.parquet"
    parquet.write_table(_table(lines), path)
    findings = _lint(cli, path)["findings"]
    errors = [f for f in findings if f["code"] == "PC000"]
    assert [(f["line"], f["message"].split(":")[0]) for f in errors] == [(3, "column 'body'")]


def test_a_table_without_json_says_so(cli, tmp_path):
    path = tmp_path / "plain.parquet"
    parquet.write_table(pa.table({"a": ["x", "y"], "n": [1, 2]}), path)
    assert_one_line_error(cli("replay", path, "--simulate"), "no column holds JSON request bodies")


def test_reading_a_parquet_table_holds_one_row_group_at_a_time(tmp_path):
    """pyarrow's pool holds what one row group needs, however many groups were read before: a
    single reader over the whole file keeps memory of each group it read (about a group's
    compressed size, here 8.6 MiB) until it is done."""
    from pcache.prompt.reading.loading import iter_documents

    rows, group = 24_000, 4_000
    cells = [json.dumps({"note": os.urandom(1100).hex()}) for _ in range(rows)]
    path = tmp_path / "wide.parquet"
    parquet.write_table(pa.table({"body": cells}), path, row_group_size=group)
    del cells
    pool = pa.default_memory_pool()
    held = [
        pool.bytes_allocated() for count, _ in enumerate(iter_documents(path)) if not count % 2000
    ]
    assert len(held) == rows // 2000
    first_groups = max(held[: 2 * group // 2000])
    assert max(held) <= first_groups + (4 << 20), [size >> 20 for size in held]
