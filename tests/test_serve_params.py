"""OpenAI parameters in `pcache serve`: `stop`, `logprobs`, `echo` honoured as vLLM honours them,
everything else either a no-op at its default or refused with a 400 naming it."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import metric, served  # noqa: E402
from tests.test_serve import sse_events, wait_until_idle  # noqa: E402

GREEDY = {"temperature": 0, "ignore_eos": True}
CHAT = [{"role": "user", "content": "Say something."}]


@pytest.fixture(scope="module")
def server():
    with served() as running:
        yield running


def post(url: str, route: str, **body) -> httpx.Response:
    return httpx.post(f"{url}/v1/{route}", json=body, timeout=30)


def answer(url: str, route: str, **body) -> tuple[str, dict]:
    response = post(url, route, **body)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    text = choice["message"]["content"] if "message" in choice else choice["text"]
    return text, response.json()


def streamed(url: str, route: str, **body) -> tuple[str, list]:
    response = post(url, route, stream=True, **body)
    assert response.status_code == 200, response.text
    chunks = sse_events(response.text)
    pieces = [c["choices"][0].get("delta", {}).get("content") or c["choices"][0].get("text", "")
              for c in chunks if c["choices"]]  # fmt: skip
    return "".join(pieces), chunks


def a_stop_string(text: str) -> tuple[str, int]:
    """A 3-character piece of `text` (not at its start) and where it first occurs."""
    for start in range(2, len(text) - 3):
        piece = text[start : start + 3]
        if text.find(piece) == start:
            return piece, start
    raise AssertionError(f"no stop string in {text!r}")


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_stop_strings_end_the_answer_before_them(server, route):
    url, _ = server
    request = {"prompt": "Once upon"} if route == "completions" else {"messages": CHAT}
    full, _ = answer(url, route, max_tokens=24, **GREEDY, **request)
    stop, start = a_stop_string(full)
    for stops in (stop, ["never-seen", stop]):
        text, body = answer(url, route, max_tokens=24, stop=stops, **GREEDY, **request)
        choice = body["choices"][0]
        assert text == full[:start]
        assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
        assert body["usage"]["completion_tokens"] < 24
        text, chunks = streamed(url, route, max_tokens=24, stop=stops, **GREEDY, **request)
        assert text == full[:start]
        assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    text, _ = answer(
        url, route, max_tokens=24, stop=stop, include_stop_str_in_output=True, **GREEDY, **request
    )
    assert text == full[: start + len(stop)]
    unmatched, body = answer(url, route, max_tokens=24, stop="never-seen", **GREEDY, **request)
    assert unmatched == full and body["choices"][0]["finish_reason"] == "length"


def test_stop_token_ids_end_the_answer_at_that_token(server):
    url, running = server
    token_ids, _ = expected_logprobs(running.codec.encode("Once upon"), 12)
    third = token_ids[2]
    first_at = token_ids.index(third)
    text, body = answer(
        url, "completions", prompt="Once upon", max_tokens=12, stop_token_ids=[third], **GREEDY
    )
    assert text == running.codec.decode(token_ids[:first_at])
    assert body["choices"][0]["stop_reason"] == third
    assert body["usage"]["completion_tokens"] == first_at + 1


def test_stopped_requests_free_their_blocks_and_count_as_stops(server):
    url, running = server
    before = metric(wait_until_idle(url), "pcache:request_success_total", finished_reason="stop")
    full, _ = answer(url, "completions", prompt="Stop me", max_tokens=40, **GREEDY)
    stop, _ = a_stop_string(full)
    answer(url, "completions", prompt="Stop me", max_tokens=40, stop=stop, **GREEDY)
    streamed(url, "completions", prompt="Stop me", max_tokens=40, stop=stop, **GREEDY)
    text = wait_until_idle(url)
    assert metric(text, "pcache:request_success_total", finished_reason="stop") == before + 2
    assert metric(text, "pcache:kv_cache_usage_perc") == 0
    assert not running.engine.sequences


def expected_logprobs(prompt_ids: list[int], steps: int):
    """log-softmax of the model's logits for the greedy continuation, from a separate engine."""
    import torch

    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    engine = Engine(EngineConfig(model="tiny", record_logits=True))
    (sequence,) = engine.generate([prompt_ids], steps, ignore_eos=True)
    return sequence.output_token_ids, [torch.log_softmax(row, -1) for row in sequence.logits]


def test_completion_logprobs_are_the_models_log_softmax(server):
    url, running = server
    prompt = "The cat"
    _, body = answer(url, "completions", prompt=prompt, max_tokens=5, logprobs=3, **GREEDY)
    logprobs = body["choices"][0]["logprobs"]
    token_ids, rows = expected_logprobs(running.codec.encode(prompt), 5)
    assert logprobs["tokens"] == [running.codec.token_text(t) for t in token_ids]
    offsets = [0]
    for token in logprobs["tokens"][:-1]:
        offsets.append(offsets[-1] + len(token))
    assert logprobs["text_offset"] == offsets
    for token_id, row, value, top in zip(
        token_ids, rows, logprobs["token_logprobs"], logprobs["top_logprobs"], strict=True
    ):
        assert value == pytest.approx(float(row[token_id]), abs=1e-4)
        best = row.topk(3)
        expected = {running.codec.token_text(i): float(v) for v, i in zip(*best, strict=True)}
        assert 3 <= len(top) <= 4 and all(
            top[name] == pytest.approx(v, abs=1e-4) for name, v in expected.items()
        )
        assert value == pytest.approx(max(top.values()), abs=1e-5)  # greedy: the best one
    _, body = answer(url, "completions", prompt=prompt, max_tokens=2, logprobs=0, **GREEDY)
    assert [len(top) for top in body["choices"][0]["logprobs"]["top_logprobs"]] == [1, 1]
    _, chunks = streamed(url, "completions", prompt=prompt, max_tokens=5, logprobs=2, **GREEDY)
    per_chunk = [c["choices"][0]["logprobs"]["token_logprobs"] for c in chunks]
    assert [v for values in per_chunk for v in values] == pytest.approx(
        logprobs["token_logprobs"], abs=1e-6
    )


def test_chat_logprobs_list_each_token_with_its_alternatives(server):
    url, _ = server
    _, body = answer(
        url, "chat/completions", messages=CHAT, max_tokens=4, logprobs=True, top_logprobs=2,
        **GREEDY,
    )  # fmt: skip
    content = body["choices"][0]["logprobs"]["content"]
    assert len(content) == body["usage"]["completion_tokens"] == 4
    for item in content:
        assert set(item) == {"token", "logprob", "bytes", "top_logprobs"}
        assert len(item["top_logprobs"]) == 2 and item["logprob"] <= 0
        assert item["top_logprobs"][0]["logprob"] == pytest.approx(item["logprob"], abs=1e-5)
        assert all(isinstance(b, int) and 0 <= b < 256 for b in item["bytes"])
    _, plain = answer(url, "chat/completions", messages=CHAT, max_tokens=2, logprobs=True)
    assert all(item["top_logprobs"] == [] for item in plain["choices"][0]["logprobs"]["content"])
    _, none = answer(url, "chat/completions", messages=CHAT, max_tokens=2)
    assert none["choices"][0]["logprobs"] is None


def test_echo_puts_the_prompt_before_the_completion(server):
    url, running = server
    full, _ = answer(url, "completions", prompt="Echo this", max_tokens=4, **GREEDY)
    echoed, _ = answer(url, "completions", prompt="Echo this", max_tokens=4, echo=True, **GREEDY)
    assert echoed == "Echo this" + full
    ids = running.codec.encode("Echo this")
    by_ids, _ = answer(url, "completions", prompt=ids, max_tokens=4, echo=True, **GREEDY)
    assert by_ids == echoed
    text, _ = streamed(url, "completions", prompt="Echo this", max_tokens=4, echo=True, **GREEDY)
    assert text == echoed


REFUSED = [
    ("completions", {"stop": 5}, "stop"),
    ("completions", {"stop": ["a", 3]}, "stop"),
    ("completions", {"stop": [""]}, "stop"),
    ("completions", {"logprobs": "many"}, "logprobs"),
    ("completions", {"logprobs": True}, "logprobs"),
    ("completions", {"logprobs": 21}, "logprobs"),
    ("completions", {"echo": "yes"}, "echo"),
    ("completions", {"echo": True, "logprobs": 1}, "echo"),
    ("completions", {"best_of": 2}, "best_of"),
    ("completions", {"suffix": "end"}, "suffix"),
    ("completions", {"n": 2}, "n"),
    ("completions", {"n": 0}, "n"),
    ("completions", {"temperature": "0.5"}, "temperature"),
    ("completions", {"temperature": -0.1}, "temperature"),
    ("completions", {"temperature": True}, "temperature"),
    ("completions", {"top_p": 0.5}, "top_p"),
    ("completions", {"top_p": 0}, "top_p"),
    ("completions", {"top_p": 1.5}, "top_p"),
    ("completions", {"top_k": 40}, "top_k"),
    ("completions", {"presence_penalty": 0.5}, "presence_penalty"),
    ("completions", {"frequency_penalty": 3}, "frequency_penalty"),
    ("completions", {"repetition_penalty": 1.2}, "repetition_penalty"),
    ("completions", {"logit_bias": {"1": 5}}, "logit_bias"),
    ("completions", {"logit_bias": 5}, "logit_bias"),
    ("completions", {"seed": 7, "temperature": 1}, "seed"),
    ("completions", {"seed": "7"}, "seed"),
    ("completions", {"min_tokens": 3}, "min_tokens"),
    ("completions", {"stop_token_ids": [-1]}, "stop_token_ids"),
    ("completions", {"prompt": ["a", "b"]}, "prompt"),
    ("completions", {"stream": True, "stream_options": {"continuous_usage_stats": True}},
     "stream_options"),
    ("completions", {"max_tokens": 3000}, "max_tokens"),
    ("chat/completions", {"max_completion_tokens": 0}, "max_completion_tokens"),
    ("chat/completions", {"max_completion_tokens": "5"}, "max_completion_tokens"),
    ("chat/completions", {"max_completion_tokens": 3000}, "max_completion_tokens"),
    ("chat/completions", {"logprobs": 3}, "logprobs"),
    ("chat/completions", {"top_logprobs": 2}, "top_logprobs"),
    ("chat/completions", {"logprobs": True, "top_logprobs": 30}, "top_logprobs"),
    ("chat/completions", {"tool_choice": "required"}, "tool_choice"),
    ("chat/completions", {"response_format": {"type": "json_object"}}, "response_format"),
    ("chat/completions", {"functions": [{"name": "f"}]}, "functions"),
    ("chat/completions", {"audio": {"voice": "x"}}, "audio"),
    ("chat/completions", {"modalities": ["text", "audio"]}, "modalities"),
    ("chat/completions", {"reasoning_effort": "high"}, "reasoning_effort"),
    ("chat/completions", {"tools": [5]}, "tools"),
    ("chat/completions", {"user": 5}, "user"),
    ("chat/completions", {"echo": True}, "echo"),
    ("chat/completions", {"stop": {"a": 1}}, "stop"),
]  # fmt: skip
ACCEPTED = [
    {"top_p": 1, "n": 1, "presence_penalty": 0, "frequency_penalty": 0.0, "logit_bias": {}},
    {"seed": 3, "temperature": 0, "user": "someone", "metadata": {"a": "b"}},
    {"best_of": 1, "top_k": -1, "repetition_penalty": 1, "min_p": 0, "suffix": None},
    {"an_unknown_field": [1, 2], "stop": [], "logprobs": None, "echo": False},
    {"response_format": {"type": "text"}, "skip_special_tokens": True},
]


@pytest.mark.parametrize(("route", "extra", "param"), REFUSED)
def test_unsupported_or_malformed_parameters_are_refused_by_name(server, route, extra, param):
    url, _ = server
    request = {"prompt": "x"} if route == "completions" else {"messages": CHAT}
    response = post(url, route, **{**request, **extra})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param, error
    assert error["type"] == "invalid_request_error" and error["code"] == 400


@pytest.mark.parametrize("extra", ACCEPTED)
@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_parameters_at_their_neutral_values_are_accepted(server, route, extra):
    url, _ = server
    request = {"prompt": "x"} if route == "completions" else {"messages": CHAT}
    if route != "completions":
        extra = {k: v for k, v in extra.items() if k not in ("best_of", "suffix", "echo")}
    response = post(url, route, max_tokens=2, **{**request, **extra})
    assert response.status_code == 200, response.text


def test_requests_in_one_batch_get_the_alternatives_each_asked_for(server):
    import asyncio

    url, _ = server

    async def main():
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            bodies = [
                {"prompt": f"Batch {k}", "max_tokens": 6, "logprobs": k, **GREEDY}
                for k in (0, 1, 5, 20)
            ]
            bodies.append({"prompt": "Batch none", "max_tokens": 6, **GREEDY})
            return await asyncio.gather(*(client.post("/v1/completions", json=b) for b in bodies))

    responses = asyncio.run(main())
    for k, response in zip((0, 1, 5, 20), responses, strict=False):
        tops = response.json()["choices"][0]["logprobs"]["top_logprobs"]
        assert len(tops) == 6 and all(k <= len(top) <= k + 1 for top in tops), (k, tops)
    assert responses[-1].json()["choices"][0]["logprobs"] is None
