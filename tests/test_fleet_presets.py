"""`-t PRESET`: a simulation tokenizes as `pcache serve --model PRESET` does, so that it
predicts, request by request, the prompt and cached tokens a pcache replica reports."""

from __future__ import annotations

import orjson
import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import serve_process  # noqa: E402

SYSTEM = "You are the support assistant of Acme Rockets. Answer briefly and cite the manual. "


def chat_trace(path) -> list[dict]:
    """Two sessions over one long system prompt, each growing by a turn, serially."""
    bodies = []
    for turn in range(3):
        for session in ("s1", "s2"):
            messages = [{"role": "system", "content": SYSTEM * 6}]
            for earlier in range(turn + 1):
                messages.append({"role": "user", "content": f"{session}: question {earlier}?"})
                if earlier < turn:
                    messages.append({"role": "assistant", "content": f"Answer {earlier}."})
            bodies.append({"model": "tiny", "messages": messages, "max_tokens": 1})
    lines = [
        {"timestamp": 1000 * index, "session_id": "s", "output_length": 1, **body}
        for index, body in enumerate(bodies)
    ]
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return bodies


def test_simulating_with_the_tiny_preset_predicts_what_pcache_serve_reports(tmp_path, cli):
    trace = tmp_path / "chat.jsonl"
    bodies = chat_trace(trace)
    rows = tmp_path / "predicted.jsonl"
    result = cli("replay", trace, "--simulate", "-t", "tiny", "-f", "json", "-o", rows)
    assert result.exit_code == 0, result.output
    predicted = [orjson.loads(line) for line in rows.read_bytes().splitlines()]
    with serve_process("--model", "tiny") as url:
        served = []
        for body in bodies:  # one at a time, as the serial simulation assumes
            response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
            assert response.status_code == 200, response.text
            usage = response.json()["usage"]
            cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            served.append((usage["prompt_tokens"], cached))
    assert [(row["prompt_tokens"], row["cached_tokens"]) for row in predicted] == served
    assert sum(cached for _, cached in served) > 0
    # the default tokenizer (gpt-oss) counts other tokens: the preset is what makes it exact
    other = cli("replay", trace, "--simulate", "-f", "json")
    assert orjson.loads(other.stdout)["query_tokens"] != sum(tokens for tokens, _ in served)


def test_a_preset_that_pcache_serve_does_not_run_has_no_tokenizer(tmp_path, cli):
    trace = tmp_path / "chat.jsonl"
    chat_trace(trace)
    result = cli("replay", trace, "--simulate", "-t", "gpt-oss-20b")
    assert result.exit_code == 2
    assert "sizes a simulated cache only" in result.output
    assert "Traceback" not in result.output
