"""`--column NAME` for table inputs (lint, diff, replay, report) and tables found in directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.bad_input.checks import assert_one_line_error

pa = pytest.importorskip("pyarrow")
parquet = pytest.importorskip("pyarrow.parquet")
csv = pytest.importorskip("pyarrow.csv")

CHAT = Path(__file__).resolve().parent / "data" / "shapes" / "chat.jsonl"


def _write(path: Path, lines: list[str]) -> Path:
    """A table whose first JSON-looking column is not the request column."""
    meta = [json.dumps({"tenant": "acme", "row": number}) for number in range(len(lines))]
    table = pa.table({"meta": meta, "request": lines})
    if path.suffix == ".csv":
        csv.write_csv(table, path)
    else:
        parquet.write_table(table, path, row_group_size=2)
    return path


@pytest.fixture
def log(tmp_path) -> Path:
    return _write(tmp_path / "log.parquet", CHAT.read_text().splitlines())


def _summary(result) -> dict:
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["summary"]


def test_lint_reads_the_named_column_as_the_file_hash_form_does(cli, log):
    expected = _summary(cli("lint", CHAT, "-f", "json"))
    by_option = _summary(cli("lint", log, "--column", "request", "-f", "json"))
    by_path = _summary(cli("lint", f"{log}#request", "-f", "json"))
    assert by_option["prompt_tokens"] == by_path["prompt_tokens"] == expected["prompt_tokens"]
    assert by_option["requests"] == 5
    # without a name, the first JSON-looking column is read: not a request body
    guessed = _summary(cli("lint", log, "-f", "json"))
    assert guessed["requests"] == 0 and guessed["rules"][0]["code"] == "PC000"


def test_replay_and_diff_take_the_column(cli, tmp_path, log):
    result = cli("replay", log, "--column", "request", "--simulate", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["requests"] == 5
    lines = CHAT.read_text().splitlines()
    first = _write(tmp_path / "a.csv", lines[:1])
    second = _write(tmp_path / "b.csv", lines[1:2])
    diff = cli("diff", first, second, "--column", "request", "-f", "json")
    assert diff.exit_code == 1, diff.output
    assert json.loads(diff.stdout)["num_tokens"][0] > 0


def test_report_takes_the_column(cli, log):
    result = cli(
        "report", log, "--column", "request", "-f", "json", "-o", "-", "--sweep-points", "2"
    )
    assert result.exit_code == 0, result.output
    assert '"requests"' in result.stdout


def test_a_column_with_no_table_or_against_the_path_is_a_usage_error(cli, log):
    assert_one_line_error(cli("lint", CHAT, "--column", "request"), "--column request", "no table")
    assert_one_line_error(
        cli("replay", f"{log}#meta", "--column", "request"), "name different columns"
    )


def test_a_directory_search_includes_tables(cli, tmp_path):
    folder = tmp_path / "logs"
    folder.mkdir()
    _write(folder / "old.parquet", CHAT.read_text().splitlines())
    (folder / "new.jsonl").write_text(CHAT.read_text())
    summary = _summary(cli("lint", folder, "--column", "request", "-f", "json"))
    assert (summary["files"], summary["requests"]) == (2, 10)


def test_without_pyarrow_a_directory_skips_its_tables_with_one_note(cli, tmp_path, monkeypatch):
    import pcache.rules.runner as runner

    monkeypatch.setattr(runner, "pyarrow_available", lambda: False)
    folder = tmp_path / "logs"
    folder.mkdir()
    _write(folder / "old.csv", CHAT.read_text().splitlines())
    only_tables = cli("lint", folder)
    assert_one_line_error(only_tables, "1 table(s)", "needs pyarrow")
    (folder / "new.jsonl").write_text(CHAT.read_text())
    result = cli("lint", folder, "-f", "json")
    assert _summary(result)["files"] == 1
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and "old.csv" in notes[0] and "needs pyarrow" in notes[0]


def test_a_column_without_a_table_is_named_as_each_caller_spells_it(cli, tmp_path):
    """The refusal names the field: the command says `--column`, the API `column`."""
    import pcache

    request = tmp_path / "request.json"
    request.write_text('{"messages": [{"role": "user", "content": "hi"}]}')
    result = cli("lint", request, "--column", "body")
    assert result.exit_code == 2
    assert "--column body: no table input" in result.output
    with pytest.raises(pcache.ArgumentValueError) as refused:
        pcache.lint([str(request)], column="body")
    assert str(refused.value) == (
        "pcache.lint: column body: no table input (.parquet, .pq, .csv) to read it from"
    )
