"""Lint of a large file takes its token ids from a forked child (`pcache.rules.token_worker`)
with more than one job: the report is byte for byte that of `--jobs 1`, with every chunk's ids
from the child, and lint goes on by itself when the child stops early."""

from __future__ import annotations

import json
import os

import pytest

from pcache.rules import token_worker
from tests.conftest import run_pcache
from tests.executor_logs import request_log
from tests.fixtures import hf_model_dir


@pytest.fixture
def workers(monkeypatch):
    """Every file forks (however small), and the workers started are kept for the test."""
    started: list[token_worker.TokenWorker] = []
    start = token_worker.TokenWorker.start

    def keep(*args, **kwargs):
        worker = start(*args, **kwargs)
        started.append(worker)
        return worker

    monkeypatch.setattr(token_worker, "FORK_MIN_BYTES", 0)
    monkeypatch.setattr(token_worker.TokenWorker, "start", keep)
    return started


def lint_json(cli, log, tokenizer: str, jobs: str) -> str:
    result = cli("lint", log, "-t", tokenizer, "--format", "json", "--exit-zero", "--jobs", jobs)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("tokenizer", ["gpt-oss", "llama3.1"])
def test_lint_with_a_forked_child_is_lint(tmp_path, cli, workers, tokenizer):
    name = tokenizer if tokenizer == "gpt-oss" else str(hf_model_dir(tokenizer))
    log = request_log(tmp_path / "log.jsonl")
    alone = lint_json(cli, log, name, "1")
    assert not workers
    assert lint_json(cli, log, name, "2") == alone
    assert '"findings"' in alone and '"PC000"' in alone  # (the line the template refuses)
    (worker,) = workers
    lines = sum(1 for line in log.read_text().splitlines() if line.strip())
    assert worker.chunks == -(-lines // 64) and worker.hits > 0  # every chunk, from the child


def test_a_child_that_stops_early_leaves_the_rest_to_lint(tmp_path, cli, workers, monkeypatch):
    send_chunks = token_worker._send_chunks

    class OneChunk:
        def __init__(self, connection):
            self.connection = connection

        def send(self, message):
            self.connection.send(message)
            os._exit(3)  # the child dies after its first chunk

    monkeypatch.setattr(
        token_worker,
        "_send_chunks",
        lambda chunks, stage, connection: send_chunks(chunks, stage, OneChunk(connection)),
    )
    log = request_log(tmp_path / "log.jsonl")
    alone = lint_json(cli, log, "gpt-oss", "1")
    assert lint_json(cli, log, "gpt-oss", "3") == alone
    (worker,) = workers
    assert worker.chunks == 1 and worker.stopped and not worker.process.is_alive()


def test_small_files_and_one_job_do_not_fork(tmp_path):
    log = request_log(tmp_path / "log.jsonl")
    assert not token_worker.wanted(str(log), 4)  # below FORK_MIN_BYTES
    assert not token_worker.wanted(str(tmp_path / "missing.jsonl"), 4)
    big = tmp_path / "big.jsonl"
    big.write_bytes(log.read_bytes() * (token_worker.FORK_MIN_BYTES // log.stat().st_size + 1))
    assert token_worker.wanted(str(big), 2) and not token_worker.wanted(str(big), 1)


def test_the_tokenizers_path_forks_quietly(tmp_path, monkeypatch):
    """`PCACHE_TOKENIZERS=1` (the Rust library's thread pool stays in the parent): the same
    report, and nothing on stderr from the child."""
    log = request_log(tmp_path / "log.jsonl")
    monkeypatch.setenv("PCACHE_TOKENIZERS", "1")
    monkeypatch.setenv("PCACHE_FORK_MIN_BYTES", "0")
    model = str(hf_model_dir("llama3.1"))
    reports = []
    for jobs in ("1", "2"):
        done = run_pcache("lint", log, "-t", model, "--format", "json", "--jobs", jobs)
        assert done.returncode == 1 and done.stderr == b"", done.stderr.decode()[-2000:]
        report = json.loads(done.stdout)
        report["summary"].pop("stage_seconds", None)
        reports.append(report)
    assert reports[0] == reports[1] and reports[0]["findings"]


def test_no_child_to_be_had_is_lint_alone(tmp_path, cli, monkeypatch):
    """Forking fails (process limits, memory): lint renders the file itself, same report."""
    monkeypatch.setattr(token_worker, "FORK_MIN_BYTES", 0)
    monkeypatch.setattr(token_worker, "fork_child", lambda *args, **kwargs: None)
    log = request_log(tmp_path / "log.jsonl")
    assert lint_json(cli, log, "gpt-oss", "2") == lint_json(cli, log, "gpt-oss", "1")
