"""`pcache lint`: a bad line is a PC000 finding for that line; the run goes on."""

from __future__ import annotations

import json

from tests.bad_input.checks import assert_one_line_error, unchanged


def findings(result) -> list[dict]:
    return json.loads(result.stdout)["findings"]


def test_a_bad_line_becomes_a_finding_and_the_other_lines_are_linted(cli, tmp_path):
    log = tmp_path / "log.jsonl"
    lines = [
        {"messages": [{"role": "user", "content": "hi"}]},
        {"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]},
        {"messages": [{"role": "user", "content": {"a": 1}}]},
        {"messages": [{"role": "user", "content": "hello"}]},
    ]
    log.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with unchanged(tmp_path):
        result = cli("lint", log, "-f", "json", "--select", "PC000")
    assert result.exit_code == 1, result.output
    errors = [d for d in findings(result) if d["code"] == "PC000"]
    assert [(d["line"], d["column"] > 1) for d in errors] == [(2, True), (3, True)]
    assert "tool_calls[0].function` must be an object" in errors[0]["message"]
    assert json.loads(result.stdout)["summary"]["requests"] == 2
    assert "Traceback" not in result.output


def test_a_bad_config_is_one_line_naming_it(cli, tmp_path):
    request = tmp_path / "a.json"
    request.write_text('{"prompt": "hi"}')
    for text, fragment in (
        ("[tool.pcache.lint\n", ":1:"),
        ("tool = 3\n", "[tool] must be a table"),
        ('[tool.pcache.lint]\nprofile = "fast"\n', "profile must be one of vllm"),
    ):
        config = tmp_path / "pyproject.toml"
        config.write_text(text)
        with unchanged(tmp_path):
            assert_one_line_error(cli("lint", request, "--config", config), str(config), fragment)


def test_sarif_uris_are_percent_encoded(cli, tmp_path):
    folder = tmp_path / "odd names"
    folder.mkdir()
    request = folder / "we ird#1%.json"
    request.write_text('{"messages": [{"role": "wizard", "content": "x"}]}')
    result = cli("lint", request, "-f", "sarif")
    assert result.exit_code == 1, result.output
    [located] = json.loads(result.stdout)["runs"][0]["results"][0]["locations"]
    uri = located["physicalLocation"]["artifactLocation"]["uri"]
    assert uri.endswith("/odd%20names/we%20ird%231%25.json"), uri
    assert uri.startswith("file:///")
