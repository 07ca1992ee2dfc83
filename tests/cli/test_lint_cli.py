"""`pcache lint` through the CLI: samples, formats, exit codes, bad input, config, --fix."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from pcache.defaults import PROFILE_NAMES
from pcache.rules.runner import request_suffixes
from tests.conftest import ROOT, SAMPLES, run_pcache

PLAIN: tuple[str, ...] = ()  # the default tokenizer (gpt-oss)
DEFECTS = SAMPLES / "prompts"
CLEAN = SAMPLES / "prompts-clean"


def documented_codes() -> set[str]:
    text = (DEFECTS / "README.md").read_text()
    line = re.search(r"Expected codes: ([^\n]+(?:\n[^\n(]+)?)", text).group(1)
    return set(re.findall(r"PC\d{3}", line))


def findings(result) -> list[dict]:
    return json.loads(result.stdout)["findings"]


def test_clean_sample_is_silent(cli):
    result = cli("lint", CLEAN, *PLAIN)
    assert result.exit_code == 0, result.output
    assert "All checks passed" in result.stdout


def test_defect_sample_yields_exactly_its_documented_codes(cli):
    result = cli("lint", DEFECTS, *PLAIN, "--format", "json")
    assert result.exit_code == 1, result.output
    codes = {finding["code"] for finding in findings(result)}
    assert codes == documented_codes()
    assert len(codes) >= 6


def test_json_output_has_sorted_keys_and_the_documented_fields(cli):
    result = cli("lint", DEFECTS, *PLAIN, "--format", "json")
    data = json.loads(result.stdout)
    assert list(data) == sorted(data)
    required = {
        "code",
        "name",
        "severity",
        "file",
        "request",
        "json_path",
        "token_position",
        "tokens_reprefilled",
        "message",
    }
    for finding in data["findings"]:
        assert required <= set(finding)
        assert list(finding) == sorted(finding)
    summary = data["summary"]
    assert 0 < summary["cacheable_ratio"] <= summary["if_fixed"]["cacheable_ratio"] <= 1
    charged = sum(row["tokens_reprefilled"] for row in summary["rules"])
    assert charged + summary["unattributed_tokens"] == summary["reprefilled_tokens"]
    assert summary["reprefilled_tokens"] == summary["prompt_tokens"] - summary["reusable_tokens"]
    per_rule = {row["code"]: row for row in summary["rules"]}
    for code, row in per_rule.items():
        mine = [f for f in data["findings"] if f["code"] == code]
        assert row["count"] == len(mine)
        assert row["tokens_reprefilled"] == sum(f["tokens_reprefilled"] for f in mine)
    # a clock in the system prompt costs everything after it, more as the session grows
    clock = [
        f["tokens_reprefilled"]
        for f in data["findings"]
        if f["code"] == "PC101" and f["severity"] == "error"
    ]
    assert len(clock) == 4 and clock == sorted(clock) and clock[0] > 0


def test_sarif_is_valid_sarif_2_1_0(cli):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "tests" / "schemas" / "sarif-2.1.0-essentials.json").read_text())
    result = cli("lint", DEFECTS, *PLAIN, "--format", "sarif")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(document), key=str)
    assert not errors, errors[0]
    run = document["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    for result_entry in run["results"]:
        assert rules[result_entry["ruleIndex"]]["id"] == result_entry["ruleId"]
    assert {r["ruleId"] for r in run["results"]} == documented_codes()


def test_sarif_schema_rejects_a_broken_log():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "tests" / "schemas" / "sarif-2.1.0-essentials.json").read_text())
    broken = {"version": "2.1.0", "runs": [{"tool": {"driver": {}}, "results": [{"level": "bad"}]}]}
    assert list(jsonschema.Draft7Validator(schema).iter_errors(broken))


def test_concise_and_github_formats(cli):
    concise = cli("lint", DEFECTS, *PLAIN, "--format", "concise")
    lines = [line for line in concise.stdout.splitlines() if ": PC" in line]
    assert lines and all(re.match(r"\S+:\d+:\d+: PC\d{3} ", line) for line in lines)
    github = cli("lint", DEFECTS, *PLAIN, "--format", "github")
    assert github.exit_code == 1
    for line in github.stdout.splitlines():
        shape = r"::(error|warning|notice) title=pcache \(PC\d{3}\),file=\S+,line=\d+,col=\d+::"
        assert re.match(shape, line)


def test_broken_file_is_one_finding_and_the_rest_is_linted(cli, tmp_path):
    shutil.copy(CLEAN / "agent_log.jsonl", tmp_path / "good.jsonl")
    (tmp_path / "broken.json").write_text('{"messages": [\n  {"role": "user", "content": "hi"\n')
    (tmp_path / "log.jsonl").write_text('{"messages": []}\n{"messages": [}\n')
    result = cli("lint", tmp_path, *PLAIN, "--format", "json")
    assert result.exit_code == 1, result.output
    errors = [f for f in findings(result) if f["code"] == "PC000"]
    assert len(errors) == 2
    broken = next(f for f in errors if f["file"].endswith("broken.json"))
    assert broken["line"] == 3 and broken["column"] >= 1
    line = next(f for f in errors if f["file"].endswith("log.jsonl"))
    assert line["line"] == 2
    assert json.loads(result.stdout)["summary"]["requests"] == 20 + 1


def test_missing_path_and_bad_options_exit_2(cli):
    result = run_pcache("lint", "no/such/dir")
    assert result.returncode == 2
    assert result.stderr.decode().count("\n") == 1 and b"Traceback" not in result.stderr
    assert "no/such/dir: no such file" in result.stderr.decode()
    for args, message in (
        ((CLEAN, "--select", "PC999"), "--select: unknown rule code or prefix 'PC999'"),
        ((CLEAN, "--format", "xml"), "--format must be one of"),
        (
            (CLEAN, "--profile", "azure"),
            f"--profile must be one of {', '.join(PROFILE_NAMES)}",
        ),
        ((), "no input"),
    ):
        bad = cli("lint", *args)
        assert bad.exit_code == 2 and bad.stderr.startswith(f"pcache: error: {message}"), args


def test_selection_and_exit_zero(cli):
    only = cli("lint", DEFECTS, *PLAIN, "--select", "PC3", "--format", "json")
    assert {f["code"] for f in findings(only)} == {"PC301", "PC303", "PC304"}
    ignored = cli(
        "lint",
        DEFECTS,
        *PLAIN,
        "--ignore",
        "PC3,PC1",
        "--extend-select",
        "PC303",
        "--format",
        "json",
    )
    codes = {f["code"] for f in findings(ignored)}
    assert "PC101" not in codes and "PC301" not in codes and "PC303" in codes
    assert cli("lint", DEFECTS, *PLAIN, "--exit-zero").exit_code == 0


def test_config_per_file_ignores_and_cli_precedence(cli, tmp_path):
    config = tmp_path / "pyproject.toml"
    config.write_text(
        '[tool.pcache.lint]\nignore = ["PC101"]\n'
        '[tool.pcache.lint.per-file-ignores]\n"*.json" = ["PC2", "PC3", "PC5"]\n'
    )
    result = cli("lint", DEFECTS, *PLAIN, "--config", config, "--format", "json")
    codes = {(f["code"], Path(f["file"]).suffix) for f in findings(result)}
    assert ("PC101", ".jsonl") not in codes
    assert not any(suffix == ".json" for _, suffix in codes)
    selected = cli(
        "lint", DEFECTS, *PLAIN, "--config", config, "--select", "PC101", "--format", "json"
    )
    assert {f["code"] for f in findings(selected)} == {"PC101"}


@pytest.mark.parametrize(
    "text",
    [
        '[tool.pcache.lint]\nselect = "PC1"\n',
        "[tool.pcache.lint]\nfoo = 1\n",
        "[tool.pcache\n",
        '[tool.pcache.lint]\nignore = ["XX9"]\n',
    ],
)
def test_bad_config_exits_2(cli, tmp_path, text):
    config = tmp_path / "pyproject.toml"
    config.write_text(text)
    result = cli("lint", CLEAN, "--config", config)
    assert result.exit_code == 2, result.output
    assert "pyproject.toml" in result.stderr


def test_explain_and_list_rules(cli):
    explained = cli("lint", "--explain", "pc301")
    assert explained.exit_code == 0
    assert "## What it does" in explained.stdout and "tool-order-changed" in explained.stdout
    as_json = json.loads(cli("lint", "--explain", "PC202", "--format", "json").stdout)
    assert as_json["name"] == "reserialized-tool-arguments"
    assert "Use instead" in as_json["explanation"]
    listed = cli("lint", "--list-rules")
    for code in ("PC101", "PC102", "PC104", "PC107", "PC405", "PC502", "PC510"):
        assert code in listed.stdout
    assert cli("lint", "--explain", "PC999").exit_code == 2


def test_stdin(cli):
    line = (CLEAN / "agent_log.jsonl").read_text().splitlines()[0]
    result = cli("lint", "-", *PLAIN, "--format", "json", input=line + "\n")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["requests"] == 1


def test_profile_changes_what_is_cacheable(cli):
    vllm = json.loads(cli("lint", CLEAN, *PLAIN, "--format", "json").stdout)
    openai = cli("lint", CLEAN, *PLAIN, "--profile", "openai", "--format", "json")
    assert openai.exit_code == 0 and not findings(openai)  # opinions are opt-in
    data = json.loads(openai.stdout)
    assert data["summary"]["cacheable_ratio"] < vllm["summary"]["cacheable_ratio"]
    # sent to OpenAI, the short shared prefix is below 1024 tokens and the sessions carry no
    # prompt_cache_key; neither matters on a local engine
    opinions = cli(
        "lint", CLEAN, *PLAIN, "--profile", "openai", "--extend-select", "PC501,PC507", "-f", "json"
    )
    assert {f["code"] for f in findings(opinions)} == {"PC501", "PC507"}
    assert opinions.exit_code == 1  # warnings fail the run


def test_fix_sorts_tools_and_schema_keys_only(cli, tmp_path):
    target = tmp_path / "review_request.json"
    shutil.copy(DEFECTS / "review_request.json", target)
    untouched = tmp_path / "clean.json"
    shutil.copy(CLEAN / "review_request.json", untouched)
    log = tmp_path / "agent_log.jsonl"
    shutil.copy(DEFECTS / "agent_log.jsonl", log)
    before_clean, before_log = untouched.read_bytes(), log.read_bytes()
    original = json.loads(target.read_text())
    result = cli("lint", tmp_path, *PLAIN, "--fix", "--format", "json")
    data = json.loads(result.stdout)
    assert data["summary"]["fixed_files"] == [str(target)]
    assert untouched.read_bytes() == before_clean and log.read_bytes() == before_log
    fixed = json.loads(target.read_text())
    assert [t["name"] for t in fixed["tools"]] == ["read_file", "search_code"]
    for tool in fixed["tools"]:
        assert list(tool["input_schema"]) == sorted(tool["input_schema"])
    assert fixed["messages"] == original["messages"] and fixed["system"] == original["system"]
    remaining = {f["code"] for f in data["findings"] if f["file"] == str(target)}
    assert "PC502" in remaining and not remaining & {"PC201", "PC301"}
    again = cli("lint", tmp_path, *PLAIN, "--fix", "--format", "json")
    assert json.loads(again.stdout)["summary"]["fixed_files"] == []


def test_fix_never_touches_tool_call_arguments(cli, tmp_path):
    request = {
        "tools": [
            {
                "type": "function",
                "function": {"name": "b", "parameters": {"type": "object", "properties": {}}},
            },
            {"type": "function", "function": {"name": "a", "parameters": {}}},
        ],
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "b", "arguments": '{"z": 1, "a": 2}'},
                    }
                ],
            },
        ],
    }
    target = tmp_path / "r.json"
    target.write_text(json.dumps(request))
    cli("lint", target, *PLAIN, "--fix")
    fixed = json.loads(target.read_text())
    assert fixed["messages"] == request["messages"]
    assert [t["function"]["name"] for t in fixed["tools"]] == ["a", "b"]


def test_json_file_findings_point_at_the_value_of_their_path(cli, tmp_path):
    from pcache.rules.slots import resolve

    body = json.loads((DEFECTS / "review_request.json").read_text())
    wrapped = tmp_path / "batch_line.json"  # a Batch wrapper: paths gain a `body.` prefix
    wrapped.write_text(
        json.dumps({"custom_id": "r1", "url": "/v1/messages", "body": body}, indent=2)
    )
    for path in (DEFECTS / "review_request.json", wrapped):
        text = path.read_text()
        document = json.loads(text)
        result = cli("lint", path, *PLAIN, "--select", "ALL", "--format", "json")
        located = [f for f in findings(result) if f["json_path"]]
        assert len(located) >= 3 and any(f["line"] > 1 for f in located)
        lines = text.split("\n")
        for finding in located:
            start = sum(len(line) + 1 for line in lines[: finding["line"] - 1])
            value, _ = json.JSONDecoder().raw_decode(text, start + finding["column"] - 1)
            assert value == resolve(document, finding["json_path"]), finding


def test_counts_in_the_summary_agree_with_their_nouns(cli, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    result = cli(
        "lint", broken, SAMPLES / "prompts" / "review_request.json", *PLAIN, "--select", "ALL"
    )
    assert result.exit_code == 1, result.output
    assert " in 1 request, 1 session." in result.stdout
    assert re.search(r"PC000 unreadable-input +1 finding +0 tokens", result.stdout)
    assert re.search(r"PC201 unsorted-schema-keys +2 findings +\d+ tokens", result.stdout)
    assert not re.search(r"\b1 (findings|requests|sessions|files)\b", result.stdout)


def test_a_directory_without_request_files_is_an_input_error(cli, tmp_path):
    (tmp_path / "notes.txt").write_text("not a request")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "r.json").write_text('{"prompt": "hi"}')
    result = cli("lint", tmp_path)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == (
        f"pcache: error: {tmp_path}: no request files ({', '.join(request_suffixes())}) in this"
        " directory"
    )


def test_an_unreadable_file_has_no_prompt_location(cli, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    result = cli("lint", broken)
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert (
        lines[0]
        == f"{broken}:1:2: PC000 [error] unreadable-input: invalid JSON: unexpected end of data"
    )
    assert lines[1].startswith("Found 1 finding (1 error)")


def test_clean_samples_are_silent_file_by_file_and_as_a_folder(cli):
    for path in (CLEAN, *sorted(CLEAN.glob("*.json*"))):
        result = cli("lint", path, *PLAIN, "--format", "json")
        assert result.exit_code == 0, (path, result.output)
        assert findings(result) == [], path


def _append_only_log(path: Path, sessions: int = 3, turns: int = 4) -> None:
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}  # keys unsorted
    tools = [  # tools unsorted too: hints, not breaks, while they never change
        {
            "type": "function",
            "function": {"name": name, "description": f"{name} a file.", "parameters": schema},
        }
        for name in ("read", "edit")
    ]
    lines = []
    for session in range(sessions):
        messages = [{"role": "system", "content": "You are a careful coding agent."}]
        for turn in range(turns):
            messages.append({"role": "user", "content": f"task {session}.{turn}: fix it"})
            lines.append(json.dumps({"messages": list(messages), "tools": tools}))
            messages.append({"role": "assistant", "content": f"fixed {session}.{turn}"})
    path.write_text("\n".join(lines) + "\n")


def test_an_append_only_multi_session_log_is_silent_and_costs_nothing(cli, tmp_path):
    log = tmp_path / "append_only.jsonl"
    _append_only_log(log)
    result = cli("lint", log, *PLAIN, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["findings"] == [] and data["summary"]["sessions"] == 3
    summary = data["summary"]
    assert summary["unattributed_tokens"] == summary["reprefilled_tokens"] > 0
    assert summary["if_fixed"]["reusable_tokens"] == summary["reusable_tokens"]
    assert summary["if_fixed"]["requests_changed"] == 0
    text = cli("lint", log, *PLAIN)
    assert text.exit_code == 0 and "All checks passed (12 requests in 1 file)." in text.stdout


def test_one_request_alone_reuses_nothing_fixed_or_not(cli):
    result = cli("lint", DEFECTS / "review_request.json", *PLAIN, "--format", "json")
    summary = json.loads(result.stdout)["summary"]
    assert summary["reusable_tokens"] == summary["if_fixed"]["reusable_tokens"] == 0
    assert all(f["tokens_reprefilled"] == 0 for f in findings(result))
    assert summary["unattributed_by_reason"]["first_request"] == summary["prompt_tokens"]


def test_lint_reuses_what_replay_simulate_reuses(cli):
    log = DEFECTS / "agent_log.jsonl"
    linted = json.loads(cli("lint", log, *PLAIN, "--format", "json").stdout)["summary"]
    replayed = json.loads(cli("replay", log, "--simulate", "--format", "json").stdout)
    assert linted["prompt_tokens"] == replayed["query_tokens"]
    assert linted["reusable_tokens"] == replayed["hit_tokens"]


def test_list_rules_and_explain_say_which_rules_are_on_by_default(cli):
    from pcache.rules import RULES

    listed = cli("lint", "--list-rules", "--format", "json")
    rows = {row["code"]: row["default"] for row in json.loads(listed.stdout)}
    assert rows == {code: rule.default for code, rule in RULES.items() if code != "PC000"}
    assert rows["PC101"] and not rows["PC510"] and not rows["PC305"]
    text = cli("lint", "--list-rules").stdout
    assert re.search(r"^PC510 +block-straddle +info +opt-in ", text, re.M)
    assert re.search(r"^PC301 +tool-order-changed +error +default ", text, re.M)
    assert (
        "On by default: no (opt-in: --extend-select PC510)"
        in cli("lint", "--explain", "PC510").stdout
    )
    assert "On by default: yes." in cli("lint", "--explain", "PC101").stdout


def test_hints_and_info_findings_only_when_selected_explicitly(cli):
    request = DEFECTS / "review_request.json"
    quiet = cli("lint", request, *PLAIN, "--ignore", "PC502", "--format", "json")
    assert quiet.exit_code == 0 and findings(quiet) == []
    hints = cli("lint", request, *PLAIN, "--select", "PC2,PC3", "--format", "json")
    assert {(f["code"], f["severity"]) for f in findings(hints)} == {
        ("PC201", "info"),
        ("PC301", "info"),
    }
    assert hints.exit_code == 1  # selected explicitly, so they count


@pytest.mark.parametrize("folder", [DEFECTS, CLEAN], ids=lambda p: p.name)
def test_a_file_alone_has_the_findings_it_has_in_its_folder(cli, folder):
    def located(path):
        result = cli("lint", path, *PLAIN, "--select", "ALL", "--format", "json")
        return {
            (f["file"], f["line"], f["code"], f["severity"], f["json_path"])
            for f in findings(result)
            if f["code"] != "PC510"  # evidence across sessions: may need the other files
        }

    together = located(folder)
    alone = set().union(*(located(path) for path in sorted(folder.glob("*.json*"))))
    assert together == alone


def test_template_clock_speaks_once_about_the_template_the_user_chose(cli):
    assert findings(cli("lint", CLEAN, "--format", "json")) == []  # pcache's default: silent
    timed = cli("lint", CLEAN / "agent_log.jsonl", "--tokenizer", "gpt-oss", "--format", "json")
    assert findings(timed) == []  # its timestamps show one day: no change to report
    for path in (CLEAN, CLEAN / "review_request.json"):  # an untimed request: cannot be seen
        result = cli("lint", path, "--tokenizer", "gpt-oss", "--format", "json")
        clock = [f for f in findings(result) if f["code"] == "PC102"]
        assert [(f["file"], f["line"], f["request"]) for f in clock] == [
            ("gpt-oss", 1, "(chat template)")
        ], path
        assert "--ignore PC102" in clock[0]["message"] and clock[0]["tokens_reprefilled"] == 0
    ignored = cli("lint", CLEAN, "--tokenizer", "gpt-oss", "--ignore", "PC102")
    assert ignored.exit_code == 0
