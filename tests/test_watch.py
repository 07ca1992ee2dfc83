"""`pcache watch LOG`: a log appended to by another process, followed through rotation and
truncation without holding it open, linted as lint lints it, scraped as Prometheus scrapes."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

import pcache
from pcache.api import lint_options
from pcache.prompt.reading.loading import iter_documents
from pcache.prompt.shapes.request import request_of
from pcache.rules.incremental import FollowedLint
from pcache.watch.exposition import escape_label, render
from pcache.watch.follow import Follower
from pcache.watch.watcher import Watcher
from tests.conftest import ROOT, run_pcache

SAMPLE = "samples/prompts/agent_log.jsonl"
SYSTEM = "You are the support assistant of ACME. Answer briefly, cite the order number. " * 12


def request_line(number: int) -> str:
    """A chat request whose system prompt carries a clock (PC101), in one of three sessions."""
    body = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "system",
                "content": f"Current time: 2026-03-14T09:{number:02d}:07Z\n{SYSTEM}",
            },
            {"role": "user", "content": f"Where is order {1000 + number}? Write to a{number}@x.io"},
        ],
    }
    line = {
        "timestamp": 1767225600000 + 1000 * number,
        "session_id": f"s{number % 3}",
        "metadata": {"team": 'blue "b"\\' if number % 2 else "red"},
        "usage": {"prompt_tokens_details": {"cached_tokens": 128 * (number > 0)}},
        "body": body,
    }
    return json.dumps(line) + "\n"


WRITER = """
import sys, time
path, first, count, split = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
sys.path.insert(0, sys.argv[5])
from tests.test_watch import request_line
for number in range(first, first + count):
    line = request_line(number)
    with open(path, "a") as log:  # opened and closed per line, as a logger reopening would
        if split and number == first + count - 1:  # the last line in two writes
            log.write(line[:100]); log.flush(); time.sleep(0.6); log.write(line[100:])
        else:
            log.write(line)
    time.sleep(0.03)
"""


def write_lines(path: Path, first: int, count: int, split: bool = False) -> None:
    """Append requests from another process (and wait for it)."""
    command = [sys.executable, "-c", WRITER, str(path), str(first), str(count), str(int(split))]
    subprocess.run([*command, str(ROOT)], check=True, timeout=30)


def scrape(url: str) -> dict[str, dict[tuple, float]]:
    """/metrics through prometheus_client's parser: {sample name: {labels: value}}."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = response.read().decode()
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = tuple(sorted(sample.labels.items()))
            samples.setdefault(sample.name, {})[key] = sample.value
    return samples


def value(samples, metric: str, **labels) -> float:
    return samples.get(metric, {}).get(tuple(sorted(labels.items())), 0.0)


def wait_for(url: str, check, seconds: float = 10.0):
    """Scrape until `check(samples)` holds (or fail after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        samples = scrape(url)
        if check(samples):
            return samples
        assert time.monotonic() < deadline, {k: v for k, v in samples.items() if "_total" in k}
        time.sleep(0.1)


class Watching:
    """`pcache watch` as a subprocess on a free loopback port, stopped by its PID."""

    def __init__(self, *arguments: str):
        env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
        command = [sys.executable, "-m", "pcache", "watch", *arguments, "--port", "0"]
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL
        )
        self.lines: list[str] = []
        deadline = time.monotonic() + 20
        while not any("http://" in line for line in self.lines):
            assert time.monotonic() < deadline and self.process.poll() is None, self.lines
            self.lines.append(self.process.stderr.readline().decode())
        self.url = re.search(r"(http://127\.0\.0\.1:\d+)/", "".join(self.lines)).group(1)

    def stop(self) -> int:
        os.kill(self.process.pid, signal.SIGTERM)
        try:
            code = self.process.wait(timeout=10)
            self.lines.extend(self.process.stderr.read().decode().splitlines())
            return code
        finally:
            if self.process.poll() is None:
                self.process.kill()
            self.process.stderr.close()

    def open_files(self) -> set[str]:
        found = set()
        for fd in Path(f"/proc/{self.process.pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                found.add(os.readlink(fd))
        return found


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc/PID/fd")
def test_a_log_written_by_another_process_through_rotation_and_truncation(tmp_path):
    log = tmp_path / "requests.jsonl"
    watch = Watching(str(log), "--interval", "0.2", "--group-by", "metadata.team")
    try:
        waiting = wait_for(watch.url, lambda s: value(s, "pcache_polls_total") >= 1)
        assert value(waiting, "pcache_log_waiting") == 1
        assert value(waiting, "pcache_requests_total") == 0
        with urllib.request.urlopen(f"{watch.url}/health", timeout=5) as response:
            assert response.read() == b"ok\n"

        write_lines(log, 0, 6, split=True)  # its last line waits for its end
        grown = wait_for(watch.url, lambda s: value(s, "pcache_requests_total") == 6)
        assert value(grown, "pcache_log_waiting") == 0
        assert value(grown, "pcache_lines_skipped_total") == 0  # no half line was read
        assert value(grown, "pcache_prompt_tokens_total") > 6 * 100
        clock = value(grown, "pcache_rule_findings_total", rule="PC101", name="clock-in-prefix")
        assert clock >= 1
        assert value(grown, "pcache_observed_requests_total") == 6
        assert value(grown, "pcache_observed_cached_tokens_total") == 5 * 128
        red = value(grown, "pcache_group_requests_total", metadata_team="red")
        blue = value(grown, "pcache_group_requests_total", metadata_team='blue "b"\\')
        assert (red, blue) == (3, 3)  # label values escaped and parsed back

        before = value(grown, "pcache_prompt_tokens_total")
        write_lines(log, 6, 2)
        log.rename(tmp_path / "requests.jsonl.1")  # its tail is read before the new file
        write_lines(log, 8, 3)
        rotated = wait_for(watch.url, lambda s: value(s, "pcache_requests_total") == 11)
        assert value(rotated, "pcache_rotations_total") >= 1
        assert value(rotated, "pcache_prompt_tokens_total") > before
        saved = value(
            rotated, "pcache_rule_reprefilled_tokens_total", rule="PC101", name=("clock-in-prefix")
        )
        assert saved > 0

        log.write_text("")  # truncated, then written again from its start
        write_lines(log, 11, 2)
        truncated = wait_for(watch.url, lambda s: value(s, "pcache_requests_total") == 13)
        assert value(truncated, "pcache_truncations_total") >= 1
        assert value(truncated, "pcache_lines_read_total") == 13

        for _ in range(40):  # between polls and across them: never held open
            assert not {path for path in watch.open_files() if "requests.jsonl" in path}
            time.sleep(0.025)

        with urllib.request.urlopen(f"{watch.url}/", timeout=5) as response:
            page = response.read().decode()
        assert '<meta http-equiv="refresh" content="2">' in page
        assert "PC101" in page and "metadata.team" in page and "<script" not in page
        with urllib.request.urlopen(f"{watch.url}/status.json", timeout=5) as response:
            assert json.loads(response.read())["requests"] == 13
    finally:
        code = watch.stop()
    assert code == 0
    assert any("waiting for" in line for line in watch.lines)


def test_once_reads_the_log_as_lint_does(cli):
    linted = cli("lint", SAMPLE, "--format", "json", "--exit-zero")
    summary = json.loads(linted.stdout)["summary"]
    watched = cli("watch", SAMPLE, "--once", "--format", "json")
    assert watched.exit_code == 1  # findings, as lint
    status = json.loads(watched.stdout)
    for key in ("requests", "sessions", "prompt_tokens", "reusable_tokens", "cacheable_ratio"):
        assert status[key] == summary[key], key
    assert status["if_fixed"] == {k: v for k, v in summary["if_fixed"].items() if k != "assumes"}
    assert status["rules"] == summary["rules"]
    assert cli("watch", SAMPLE, "--once", "--exit-zero").exit_code == 0


def test_once_text_and_prometheus_output(cli):
    text = cli("watch", SAMPLE, "--once", "--group-by", "model").stdout
    assert "cacheable: 68.5% as is, 86.4% if fixed" in text
    assert "PC101 clock-in-prefix" in text and "model=gpt-oss-120b: 26 requests" in text
    exposition = cli("watch", SAMPLE, "--once", "-f", "prometheus", "--exit-zero").stdout
    families = {family.name: family for family in text_string_to_metric_families(exposition)}
    assert families["pcache_requests"].type == "counter"
    assert families["pcache_requests"].samples[0].value == 26
    assert families["pcache_cacheable_ratio"].samples[0].value == pytest.approx(0.684805)


def test_redact_hides_the_requests_values(tmp_path, cli):
    log = tmp_path / "log.jsonl"
    log.write_text("".join(request_line(number) for number in range(4)))
    shown = cli("watch", log, "--once", "-f", "json", "--select", "ALL", "--group-by", "user")
    assert "2026-03-14T09:01:07Z" in shown.stdout
    hidden = cli("watch", log, "--once", "-f", "json", "--select", "ALL", "--redact")
    assert "2026-03-14T09:0" not in hidden.stdout and "@x.io" not in hidden.stdout
    assert "<clock>" in hidden.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = run_pcache("watch", tmp_path / "none.jsonl", "--once", timeout=30)
    assert missing.returncode == 2
    assert missing.stderr.decode().strip().endswith("none.jsonl: no such file or directory")
    assert len(missing.stderr.splitlines()) == 1
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        busy = run_pcache("watch", tmp_path / "x.jsonl", "--port", str(port), timeout=30)
    assert busy.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr.decode()
    assert b"Traceback" not in busy.stderr and len(busy.stderr.splitlines()) == 1


def test_refused_options_are_one_line_and_exit_2(cli):
    for arguments in (["--interval", "0"], ["--format", "xml"], ["--profile", "nope"]):
        refused = cli("watch", SAMPLE, "--once", *arguments)
        assert refused.exit_code == 2 and len(refused.stderr.splitlines()) == 1, arguments


def test_a_broken_line_is_counted_and_the_rest_linted(tmp_path, cli):
    log = tmp_path / "log.jsonl"
    log.write_text(request_line(0) + '{"body": \n' + request_line(1))
    status = json.loads(cli("watch", log, "--once", "-f", "json", "--exit-zero").stdout)
    assert (status["requests"], status["lines_skipped"]) == (2, 1)


# -- the follower --------------------------------------------------------------------------


def test_a_partial_line_waits_for_its_end(tmp_path):
    log = tmp_path / "a.jsonl"
    follower = Follower(log)
    assert follower.poll().missing
    log.write_bytes(b'{"a": 1}\n{"b"')
    assert [line.raw for line in follower.poll().lines] == [b'{"a": 1}']
    assert follower.poll().lines == []
    with log.open("ab") as handle:
        handle.write(b": 2}\n")
    assert [(line.number, line.raw) for line in follower.poll().lines] == [(2, b'{"b": 2}')]


def test_rotation_reads_the_old_tail_first_and_truncation_starts_over(tmp_path):
    log = tmp_path / "a.jsonl"
    follower = Follower(log)
    log.write_bytes(b"1\n")
    assert [line.raw for line in follower.poll().lines] == [b"1"]
    with log.open("ab") as handle:
        handle.write(b"2\n")
    log.rename(tmp_path / "a.jsonl.1")
    log.write_bytes(b"3\n33\n")
    poll = follower.poll()
    assert [(Path(line.source).name, line.raw) for line in poll.lines] == [
        ("a.jsonl.1", b"2"),
        ("a.jsonl", b"3"),
        ("a.jsonl", b"33"),
    ]
    assert follower.stats.rotations == 1
    log.write_bytes(b"4\n")  # shorter than what was read: truncated
    assert [line.raw for line in follower.poll().lines] == [b"4"]
    assert follower.stats.truncations == 1


def test_a_directory_of_rotating_files(tmp_path):
    (tmp_path / "app.jsonl").write_bytes(b"1\n2\n")
    (tmp_path / "notes.txt").write_bytes(b"not a log\n")
    follower = Follower(tmp_path)
    assert [line.raw for line in follower.poll().lines] == [b"1", b"2"]
    with (tmp_path / "app.jsonl").open("ab") as handle:
        handle.write(b"3\n")
    (tmp_path / "app.jsonl").rename(tmp_path / "app.jsonl.1")
    (tmp_path / "app.jsonl").write_bytes(b"4\n")
    os.utime(tmp_path / "app.jsonl.1", (1, 1))  # the older file is read first
    assert [line.raw for line in follower.poll().lines] == [b"3", b"4"]
    assert follower.poll().lines == []


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.text("ab\n", max_size=12), max_size=12),
    st.integers(1, 16),
)
def test_every_complete_line_is_read_once_whatever_the_writes(tmp_path_factory, writes, size):
    log = tmp_path_factory.mktemp("follow") / "a.jsonl"
    follower = Follower(log, read_bytes=size)
    read = []
    for piece in writes:
        with log.open("a") as handle:
            handle.write(piece)
        while True:
            poll = follower.poll()
            read.extend(line.raw.decode() for line in poll.lines)
            if not poll.more:
                break
    complete = "".join(writes).rsplit("\n", 1)[0] if "\n" in "".join(writes) else ""
    expected = [line for line in complete.split("\n") if line.strip()] if complete else []
    assert read == expected


# -- the pass kept open ---------------------------------------------------------------------


def _items(path: str):
    return [request_of(document) for document in iter_documents(path)]


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=10))
def test_the_log_as_is_is_lint_s_wherever_the_pieces_end(sizes):
    """What the cache reuses as is does not depend on where the pieces end; the fixed log's
    figures only grow, and in one piece they are lint's."""
    summary = pcache.lint([SAMPLE]).summary
    items = _items(SAMPLE)
    options, config = lint_options()
    followed = FollowedLint(options, config)
    start, index, seen = 0, 0, []
    while start < len(items):
        size = sizes[index % len(sizes)]
        followed.add(items[start : start + size])
        start, index = start + size, index + 1
        seen.append(followed.totals())
    totals = seen[-1]
    assert (totals.requests, totals.prompt_tokens, totals.reusable_tokens) == (
        summary.requests,
        summary.prompt_tokens,
        summary.reusable_tokens,
    )
    for earlier, later in itertools.pairwise(seen):
        assert later.reusable_tokens_if_fixed >= earlier.reusable_tokens_if_fixed
        tokens = {t.code: t.tokens_reprefilled for t in earlier.rules}
        assert all(t.tokens_reprefilled >= tokens.get(t.code, 0) for t in later.rules)
    whole = FollowedLint(options, config)
    whole.add(items)
    assert whole.totals().reusable_tokens_if_fixed == summary.reusable_tokens_if_fixed
    assert [(t.code, t.count, t.tokens_reprefilled) for t in whole.totals().rules] == [
        (t.code, t.count, t.tokens_reprefilled) for t in summary.rules
    ]


def test_label_values_are_escaped():
    assert escape_label('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    options, config = lint_options(group_by=["metadata.team"])
    watcher = Watcher(SAMPLE, options, config)
    watcher.catch_up()
    families = list(text_string_to_metric_families(render(watcher.status)))
    grouped = next(f for f in families if f.name == "pcache_group_requests")
    assert grouped.samples[0].labels == {"metadata_team": "(none)"}


# -- the docs' commands ----------------------------------------------------------------------


def test_the_docs_watch_commands_run(tmp_path):
    """The long-running `pcache watch` lines of the docs (test_readme.py runs the others),
    on a copy of their log, stopped once a scrape shows its requests."""
    from tests.test_readme import WATCHING

    assert WATCHING
    for command in WATCHING:
        words = shlex.split(command)[2:]
        log = tmp_path / Path(words[0]).name
        log.write_text("".join(request_line(number) for number in range(3)))
        port = words.index("--port") if "--port" in words else None
        if port is not None:
            del words[port : port + 2]
        watch = Watching(str(log), *words[1:])
        try:
            wait_for(watch.url, lambda s: value(s, "pcache_requests_total") == 3)
        finally:
            assert watch.stop() == 0


def test_the_window_forgets_what_no_request_used_for_that_long(tmp_path, cli):
    """vllm names no cache lifetime: the watch forgets after an hour unless told otherwise."""
    lines = [json.loads(request_line(0)), json.loads(request_line(0))]
    lines[1]["timestamp"] += 2 * 3_600_000  # the same request two hours later
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    forgot = json.loads(cli("watch", log, "--once", "-f", "json", "--exit-zero").stdout)
    kept = cli("watch", log, "--once", "-f", "json", "--exit-zero", "--window", "7201")
    assert (forgot["window"], forgot["reusable_tokens"]) == (3600.0, 0)
    assert json.loads(kept.stdout)["reusable_tokens"] > 0


def _get(url: str, key: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if key is not None:
        request.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers.get("WWW-Authenticate", "")
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("WWW-Authenticate", "")


def test_a_key_guards_the_page_and_the_status_and_with_metrics_auth_the_metrics(tmp_path):
    log = tmp_path / "log.jsonl"
    write_lines(log, 0, 3)
    for metrics_auth in (False, True):
        flags = ("--metrics-auth",) if metrics_auth else ()
        watching = Watching(str(log), "--api-key", "s3cret", *flags)
        try:
            url = watching.url
            for route in ("/", "/status.json"):
                assert _get(url + route) == (401, "Bearer")
                assert _get(url + route, "wrong")[0] == 401
                assert _get(url + route, "s3cret")[0] == 200
            assert _get(url + "/health")[0] == 200
            assert _get(url + "/metrics")[0] == (401 if metrics_auth else 200)
            assert _get(url + "/metrics", "s3cret")[0] == 200
        finally:
            assert watching.stop() == 0


def test_an_idle_connection_is_closed_and_holds_up_no_one(monkeypatch):
    from pcache.watch import server as watch_server

    monkeypatch.setattr(watch_server._Handler, "timeout", 0.5)
    served = watch_server.StatusServer("127.0.0.1", 0, lambda: None, 2)
    served.start()
    try:
        idle = socket.create_connection(("127.0.0.1", served.port))
        idle.settimeout(5)
        assert _get(f"http://127.0.0.1:{served.port}/health")[0] == 200  # served meanwhile
        assert idle.recv(1) == b""  # closed by the server after its read timeout
        idle.close()
    finally:
        served.close()


def test_metrics_auth_needs_a_key(cli):
    refused = cli("watch", SAMPLE, "--metrics-auth")
    assert refused.exit_code == 2 and "--metrics-auth needs --api-key" in refused.stderr
