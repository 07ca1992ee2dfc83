"""The pre-commit hook and the GitHub Action, run the way pre-commit and GitHub run them.

Fixtures are recorded by the real Anthropic SDK (tests/sdk_agents.py): a clean agent loop and
one with a clock planted in its system prompt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import anthropic
import httpx2
import jsonschema
import orjson
import pytest
import yaml

from pcache.record import Transport
from pcache.record.canned import CannedResponses
from tests.conftest import ROOT
from tests.sdk_agents import SYSTEM, anthropic_agent, anthropic_responses, ticking_clock

VENDOR_SCHEMAS = Path(pytest.importorskip("check_jsonschema").__file__).parent / (
    "builtin_schemas/vendor"
)
SARIF_SCHEMA = ROOT / "tests" / "schemas" / "sarif-2.1.0-essentials.json"


def record(path: Path, clock=None, days_ago: int = 0) -> Path:
    """One agent loop recorded to `path`, with a system prompt above every provider's minimum
    cacheable prefix. Checked-in fixtures are recorded on different days: `days_ago` moves the
    recorded timestamps back (a mock answers in microseconds, so loops recorded back to back
    would read as sessions fanned out at once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    canned = httpx2.MockTransport(CannedResponses(anthropic_responses()))
    client = anthropic.Anthropic(
        api_key="test", http_client=httpx2.Client(transport=Transport(path, canned))
    )
    anthropic_agent(client, clock, SYSTEM * 6)
    lines = [orjson.loads(line) for line in path.read_bytes().splitlines()]
    for line in lines:
        moment = datetime.fromisoformat(line["timestamp"].replace("Z", "+00:00"))
        line["timestamp"] = (moment - timedelta(days=days_ago)).isoformat()
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def environment() -> dict[str, str]:
    """This checkout's pcache first on the path, for the `pcache` command the hooks call."""
    scripts = str(Path(sys.executable).parent)
    path = os.pathsep.join([scripts, os.environ.get("PATH", "")])
    return dict(os.environ, PYTHONPATH=str(ROOT), PATH=path)


def _load_yaml(text: str) -> dict:
    """YAML as GitHub reads it: `on` is a key, not YAML 1.1's boolean True."""
    value = yaml.safe_load(text)
    if isinstance(value, dict) and True in value:
        value["on"] = value.pop(True)
    return value


def readme_yaml_blocks() -> list[dict]:
    """The YAML examples of the README and of docs/*.md."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(page.read_text() for page in pages)
    return [_load_yaml(block) for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


# -- pre-commit ------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def fixture_repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    record(repo / "requests" / "clean.jsonl", days_ago=3)
    record(repo / "requests" / "clocked.jsonl", clock=ticking_clock(), days_ago=2)
    record(repo / "requests" / "legacy" / "clocked.jsonl", clock=ticking_clock(), days_ago=1)
    (repo / "notes.txt").write_text("not a request\n")
    (repo / "pyproject.toml").write_text(
        '[tool.pcache.lint]\nper-file-ignores = { "requests/legacy/*" = ["PC101"] }\n'
    )
    _git(repo, "init", "-q")
    return repo


def _pre_commit_config(repo: Path) -> None:
    """The hook exactly as the manifest declares it, as a local hook that needs no install."""
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    local = {key: hook[key] for key in ("id", "name", "entry", "files", "require_serial")}
    config = {"repos": [{"repo": "local", "hooks": [{**local, "language": "system"}]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config))


def _pre_commit(repo: Path) -> subprocess.CompletedProcess:
    env = environment() | {"PRE_COMMIT_HOME": str(repo.parent / "pre-commit-home")}
    command = [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"]
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)


def test_the_manifest_is_one_valid_pre_commit_hook():
    from pre_commit.clientlib import load_manifest

    (hook,) = load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    assert hook["id"] == "pcache-lint" and hook["entry"] == "pcache lint"
    assert hook["language"] == "python"  # installs this repository's package
    pattern = re.compile(hook["files"])
    assert all(pattern.search(name) for name in ("a.json", "log.jsonl", "b.ndjson"))
    assert not pattern.search("notes.txt")


def test_the_hook_runs_under_pre_commit_and_respects_the_configuration(fixture_repo):
    _pre_commit_config(fixture_repo)
    _git(fixture_repo, "add", "-A")
    result = _pre_commit(fixture_repo)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "requests/clocked.jsonl:2:1: PC101" in result.stdout
    assert "in 9 requests" in result.stdout  # the three files were linted...
    assert "requests/legacy/clocked.jsonl:2:1: PC101" not in result.stdout  # ...as configured
    assert "notes.txt" not in result.stdout

    _git(fixture_repo, "rm", "-q", "-f", "requests/clocked.jsonl", "requests/legacy/clocked.jsonl")
    result = _pre_commit(fixture_repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


# -- the GitHub Action ---------------------------------------------------------------------


def _schema(name: str) -> dict:
    return json.loads((VENDOR_SCHEMAS / f"{name}.json").read_text())


def _readme_workflow() -> dict:
    (workflow,) = [block for block in readme_yaml_blocks() if "jobs" in block]
    return workflow


def test_action_yml_validates_against_the_github_actions_schema():
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    jsonschema.validate(action, _schema("github-actions"))
    assert action["runs"]["using"] == "composite"
    uses = [step.get("uses", "") for step in action["runs"]["steps"]]
    assert any(use.startswith("github/codeql-action/upload-sarif@") for use in uses)


def test_the_readme_workflow_validates_and_passes_only_inputs_the_action_has():
    workflow = _readme_workflow()
    jsonschema.validate(workflow, _schema("github-workflows"))
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    (step,) = [s for s in workflow["jobs"]["pcache"]["steps"] if "/pcache@" in s.get("uses", "")]
    assert set(step["with"]) <= set(action["inputs"])
    required = {name for name, spec in action["inputs"].items() if spec.get("required")}
    assert required <= set(step["with"])
    assert workflow["permissions"]["security-events"] == "write"  # upload-sarif needs it


def _expand(value: str, inputs: dict[str, str]) -> str:
    def lookup(match: re.Match) -> str:
        scope, name = match.group(1), match.group(2)
        assert scope in ("inputs", "github"), match.group(0)
        return inputs[name] if scope == "inputs" else str(ROOT)

    return re.sub(r"\$\{\{\s*(inputs|github)\.([\w-]+)\s*\}\}", lookup, value)


def _run_action(workspace: Path, inputs: dict[str, str]) -> dict[str, subprocess.CompletedProcess]:
    """Each `run` step of action.yml in bash, as a runner runs it (the install step is skipped:
    this checkout is already importable)."""
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    given = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    given.update(inputs)
    outcomes = {}
    for run_step in action["runs"]["steps"]:
        if "run" not in run_step or run_step["name"] == "Install pcache":
            continue
        env = {k: _expand(v, given) for k, v in run_step.get("env", {}).items()}
        outcomes[run_step["name"]] = subprocess.run(
            [shutil.which("bash"), "-e", "-c", run_step["run"]],
            cwd=workspace,
            env=environment() | env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    return outcomes


def _readme_inputs() -> dict[str, str]:
    steps = _readme_workflow()["jobs"]["pcache"]["steps"]
    (step,) = [s for s in steps if "/pcache@" in s.get("uses", "")]
    return {name: str(value) for name, value in step["with"].items()}


def test_the_action_steps_run_as_a_runner_runs_them(tmp_path):
    inputs = _readme_inputs()
    workspace = tmp_path / "workspace"
    record(workspace / inputs["paths"] / "clean.jsonl", days_ago=2)
    record(workspace / inputs["paths"] / "clocked.jsonl", clock=ticking_clock(), days_ago=1)
    outcomes = _run_action(workspace, inputs)
    sarif_run = outcomes["Write the SARIF report"]
    assert sarif_run.returncode == 0, sarif_run.stderr
    sarif = json.loads((workspace / "pcache.sarif").read_text())
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    rules = {result["ruleId"] for result in sarif["runs"][0]["results"]}
    assert "PC101" in rules
    annotate = outcomes["Annotate the findings"]
    assert annotate.returncode == 1  # findings fail the job
    errors = [line for line in annotate.stdout.splitlines() if line.startswith("::error ")]
    assert errors and all("clocked.jsonl" in line for line in errors)
    assert "clean.jsonl" not in annotate.stdout


def test_with_since_the_action_reports_only_new_findings(tmp_path):
    inputs = _readme_inputs() | {"since": "HEAD"}
    workspace = tmp_path / "workspace"
    record(workspace / inputs["paths"] / "clocked.jsonl", clock=ticking_clock(), days_ago=1)
    _git(workspace, "init", "-q")
    _git(workspace, "-c", "user.email=ci@example.test", "-c", "user.name=CI", "add", "-A")
    _git(workspace, "-c", "user.email=ci@example.test", "-c", "user.name=CI", "commit", "-qm", "x")
    outcomes = _run_action(workspace, inputs)
    annotate = outcomes["Annotate the findings"]
    assert annotate.returncode == 0, annotate.stdout + annotate.stderr
    assert annotate.stdout == ""
    sarif = json.loads((workspace / "pcache.sarif").read_text())
    assert sarif["runs"][0]["results"] == []
