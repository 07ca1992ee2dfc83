"""`--redact`: no string of a request in any output, and the same findings, paths and costs.

Every output format of lint, diff, report and replay is searched for every string value of
the input longer than 6 characters (`tests.fixtures.gateway_log.content_strings`): none
appears, while the same run without `--redact` quotes many.
"""

from __future__ import annotations

import orjson
import pytest

from pcache.text.redaction import Redactor, redacting, shown
from tests.conftest import SAMPLES, run_pcache
from tests.fixtures.gateway_log import content_strings, write_gateway_log

LINT_FORMATS = ("full", "concise", "json", "github", "sarif")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    path = tmp_path_factory.mktemp("gateway") / "gateway.jsonl"
    write_gateway_log(path, seed=7)
    strings: set[str] = set()
    for line in path.read_bytes().splitlines():
        content_strings(orjson.loads(line), None, strings)
    return path, strings


def _samples_strings() -> set[str]:
    strings: set[str] = set()
    for path in [*sorted((SAMPLES / "prompts").iterdir()), SAMPLES / "a.json", SAMPLES / "b.json"]:
        if path.suffix == ".json":
            content_strings(orjson.loads(path.read_bytes()), None, strings)
        elif path.suffix == ".jsonl":
            for line in path.read_bytes().splitlines():
                content_strings(orjson.loads(line), None, strings)
    # field names the samples also use as values, which paths name by design
    return strings - {"content", "pattern"}


def _leaks(output: str, strings: set[str]) -> list[str]:
    return sorted(value for value in strings if value in output)


@pytest.mark.parametrize("format", LINT_FORMATS)
def test_lint_redacted_quotes_nothing_of_the_log(gateway, format):
    path, strings = gateway
    done = run_pcache("lint", path, "--select", "ALL", "--redact", "-f", format)
    assert done.returncode == 1, done.stderr.decode()
    output = done.stdout.decode() + done.stderr.decode()
    assert "PC" in output
    assert _leaks(output, strings) == []


def test_lint_without_redact_quotes_the_log(gateway):
    """The check above can fail: the same findings unredacted quote the log."""
    path, strings = gateway
    done = run_pcache("lint", path, "--select", "ALL", "-f", "json")
    assert len(_leaks(done.stdout.decode(), strings)) > 10


@pytest.mark.parametrize("format", LINT_FORMATS)
def test_lint_redacted_samples(format):
    done = run_pcache("lint", SAMPLES / "prompts", "--select", "ALL", "--redact", "-f", format)
    output = done.stdout.decode()
    if format == "sarif":  # the rules' own documentation names example tools: its results
        output = orjson.dumps(orjson.loads(done.stdout)["runs"][0]["results"]).decode()
    assert _leaks(output, _samples_strings()) == []


def test_redaction_keeps_findings_paths_and_costs(gateway):
    path, _ = gateway
    plain = orjson.loads(run_pcache("lint", path, "--select", "ALL", "-f", "json").stdout)
    hidden = orjson.loads(
        run_pcache("lint", path, "--select", "ALL", "-f", "json", "--redact").stdout
    )
    keep = ("code", "file", "line", "column", "json_path", "token_position", "tokens_reprefilled")
    assert [[d[k] for k in keep] for d in plain["findings"]] == [
        [d[k] for k in keep] for d in hidden["findings"]
    ]
    assert hidden["summary"]["reprefilled_tokens"] == plain["summary"]["reprefilled_tokens"]


@pytest.mark.parametrize("format", ("html", "json"))
def test_report_redacted(gateway, tmp_path, format):
    path, strings = gateway
    out = tmp_path / f"report.{format}"
    done = run_pcache("report", path, "--redact", "-f", format, "-o", out)
    assert done.returncode == 0, done.stderr.decode()
    text = out.read_text()
    assert "&lt;text " in text or "<text " in text
    assert _leaks(text, strings) == []


@pytest.mark.parametrize("format", ("text", "json"))
def test_diff_redacted(format):
    done = run_pcache("diff", SAMPLES / "a.json", SAMPLES / "b.json", "--redact", "-f", format)
    assert done.returncode == 1, done.stderr.decode()
    assert "<clock>" in done.stdout.decode()
    assert _leaks(done.stdout.decode(), _samples_strings()) == []
    if format == "json":
        result = orjson.loads(done.stdout)
        assert result["a_tokens"] == [] and result["first_divergence_token"] == 142


def test_replay_redacted(gateway, tmp_path):
    path, strings = gateway
    out = tmp_path / "per_request.jsonl"
    done = run_pcache("replay", path, "--simulate", "--redact", "-f", "json", "-o", out)
    assert done.returncode == 0, done.stderr.decode()
    assert _leaks(done.stdout.decode() + out.read_text(), strings) == []


def test_api_redacts(gateway):
    import pcache

    path, strings = gateway
    report = pcache.lint([str(path)], select=["ALL"], redact=True)
    messages = " ".join(d.message for d in report.diagnostics)
    assert report.diagnostics and _leaks(messages, strings) == []
    result = pcache.diff(str(SAMPLES / "a.json"), str(SAMPLES / "b.json"), redact=True)
    assert "<clock>" in result.cause.a_excerpt and result.b_tokens == []


def test_shapes():
    redactor = Redactor(b"key")
    assert redactor.shape("2026-03-02 09:14:03") == "<clock>"
    assert redactor.shape("0b6f6c6e-8a4c-4c8e-9e3f-2f6a1d2b7c41") == "<uuid>"
    email = redactor.shape("ada@example.com")
    assert email.startswith("<email #") and email == redactor.shape("ada@example.com")
    assert redactor.shape("ada@example.com") != redactor.shape("bob@example.com")
    assert redactor.shape("hello world") == f"<text 11 chars #{redactor.digest('hello world')}>"
    assert Redactor(b"other").shape("hello world") != redactor.shape("hello world")
    assert shown("hello world") == "hello world"
    with redacting(key=b"key"):
        assert shown("hello world") == redactor.shape("hello world")
    assert shown("hello world") == "hello world"


def test_recorder_redacted_keeps_what_caching_needs(tmp_path):
    """`Recorder(redact=True)` writes token counts and block hashes, no text; the recording
    replays to the cached tokens the plain recording replays to."""
    import openai

    from pcache.record import Recorder
    from pcache.record.canned import chat_completion

    system = "You are Zorblax, the assistant of the qwertyuiop store. " * 40
    results = {}
    for redact in (False, True):
        path = tmp_path / f"{redact}.jsonl"
        recorder = Recorder(path, session_id="ada@example.com", redact=redact)
        client = openai.OpenAI(api_key="test", http_client=recorder.client())
        for turn in range(3):
            recorder.respond(chat_completion("fine"))
            client.chat.completions.create(
                model="gpt-4o",
                messages=[
                    {"role": "system", "content": system},
                    {"role": "user", "content": f"question number {turn} about zorblaxes"},
                ],
            )
        recorder.close()
        text = path.read_text()
        if redact:
            assert "Zorblax" not in text and "ada@example.com" not in text
            assert "zorblaxes" not in text
            first = orjson.loads(text.splitlines()[0])
            assert first["input_length"] > 400 and first["hash_ids"]
        done = run_pcache("replay", path, "--simulate", "-f", "json")
        assert done.returncode == 0, done.stderr.decode()
        results[redact] = orjson.loads(done.stdout)
    plain, hidden = results[False], results[True]
    assert hidden["query_tokens"] == plain["query_tokens"]
    assert hidden["hit_tokens"] == plain["hit_tokens"] > 0
