"""`pcache lint --diff BASE`: only the findings a change introduced since a git revision."""

from __future__ import annotations

import subprocess

import orjson
import pytest

from tests.conftest import run_pcache

SYSTEM = "You are the parcel desk. Answer briefly and politely. " * 8


def _line(session: str, clock: str | None, *turns: str) -> bytes:
    text = SYSTEM if clock is None else f"{SYSTEM}Now: 2026-03-02 {clock} UTC."
    messages = [{"role": "system", "content": text}]
    messages += [{"role": "user", "content": turn} for turn in turns]
    return orjson.dumps({"session_id": session, "messages": messages}) + b"\n"


def _git(repo, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "ci@example.test")
    _git(tmp_path, "config", "user.name", "CI")
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "old.jsonl").write_bytes(
        _line("old", "10:16:02", "Where is P-42?")
        + _line("old", "10:16:09", "Where is P-42?", "Thanks")
    )
    (logs / "fine.jsonl").write_bytes(_line("fine", None, "Hi") + _line("fine", None, "Hi", "Bye"))
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "commit", "-q", "-m", "logs")
    return tmp_path


def _findings(result) -> list[dict]:
    assert result.returncode in (0, 1), result.stderr.decode()
    return orjson.loads(result.stdout)["findings"]


def test_findings_already_there_at_base_are_not_reported(repo):
    everything = _findings(run_pcache("lint", "logs", "--format", "json", cwd=repo))
    assert any(f["code"] == "PC101" and f["file"] == "logs/old.jsonl" for f in everything)
    result = run_pcache("lint", "logs", "--diff", "HEAD", "--format", "json", cwd=repo)
    assert result.returncode == 0 and _findings(result) == []


def test_a_change_reports_only_what_it_introduced(repo):
    fine = repo / "logs" / "fine.jsonl"  # a clock planted where there was none
    fine.write_bytes(_line("fine", "10:20:00", "Hi") + _line("fine", "10:20:30", "Hi", "Bye"))
    old = repo / "logs" / "old.jsonl"  # a session added above the old findings
    old.write_bytes(_line("other", None, "New question") + old.read_bytes())
    result = run_pcache("lint", "logs", "--diff", "HEAD", "--format", "json", cwd=repo)
    assert result.returncode == 1
    new = _findings(result)
    assert new and {f["file"] for f in new} == {"logs/fine.jsonl"}
    assert "PC101" in {f["code"] for f in new}


def test_a_file_added_since_base_is_new_in_full(repo):
    old = (repo / "logs" / "old.jsonl").read_bytes()
    (repo / "logs" / "added.jsonl").write_bytes(old.replace(b'"old"', b'"added"'))
    everything = _findings(run_pcache("lint", "logs", "--format", "json", cwd=repo))
    new = _findings(run_pcache("lint", "logs", "--diff", "HEAD", "--format", "json", cwd=repo))
    added = [f for f in everything if f["file"] == "logs/added.jsonl"]
    assert added and all(finding in new for finding in added)
    assert not [f for f in new if f["file"] == "logs/old.jsonl" and f["code"] == "PC101"]


@pytest.mark.parametrize(
    ("revision", "message"),
    [("no-such-rev", "--diff: unknown revision 'no-such-rev'")],
)
def test_an_unknown_revision_is_a_usage_error(repo, revision, message):
    result = run_pcache("lint", "logs", "--diff", revision, cwd=repo)
    assert result.returncode == 2
    assert message in result.stderr.decode() and b"Traceback" not in result.stderr


def test_a_revision_that_reads_as_a_git_option_is_refused_unrun(repo):
    result = run_pcache("lint", "logs", "--diff", "--output=written.txt", cwd=repo)
    assert result.returncode == 2
    assert "--diff: unknown revision '--output=written.txt'" in result.stderr.decode()
    assert not (repo / "written.txt").exists()


def test_outside_a_repository_is_a_usage_error(tmp_path):
    (tmp_path / "a.jsonl").write_bytes(_line("a", None, "Hi"))
    result = run_pcache("lint", "a.jsonl", "--diff", "HEAD", cwd=tmp_path)
    assert result.returncode == 2
    assert "--diff needs a git repository" in result.stderr.decode()


def test_stdin_has_no_history(repo):
    result = run_pcache("lint", "-", "--diff", "HEAD", input=_line("a", None, "Hi"), cwd=repo)
    assert result.returncode == 2
    assert "stdin has no history" in result.stderr.decode() and b"Traceback" not in result.stderr
