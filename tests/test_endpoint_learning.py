"""`replay --endpoint` with no flags learns from the server what its prediction needs: the
block size it publishes, its own tokens for each prompt (/tokenize), the API the trace
calls for; and it says where the server's prompt counts differ from its own.

The server is a small vLLM of our own on loopback: its own chat template and BOS, its own
block size, and an independent oracle for cached tokens (the longest prefix shared with an
earlier prompt, in whole blocks, never the last token), as vLLM's block pool reports them.
"""

from __future__ import annotations

import datetime

import orjson
import pytest

pytest.importorskip("httpx")

from tests.conftest import ROOT
from tests.endpoint_fakes import chat_stream, completion_stream, fake_server

TRACE = ROOT / "samples/traces/requests_tiny.jsonl"
TODAY = datetime.date.today().isoformat()
BOS = 1
EVENTS = {"content-type": "text/event-stream"}


class FakeVllm:
    """vLLM's routes over a byte tokenizer: BOS, then each message as `<role>content\\n`."""

    def __init__(
        self,
        block_size: int = 32,
        tokenize: bool = True,
        publish: str = "metrics",
        bos_on_ids: bool = False,
        num_gpu_blocks: int | None = None,
        total_tokens: int | None = None,
    ) -> None:
        self.block_size = block_size
        self.num_gpu_blocks = num_gpu_blocks
        self.total_tokens = total_tokens
        self.tokenize = tokenize
        self.publish = publish
        self.bos_on_ids = bos_on_ids
        self.seen: list[list[int]] = []
        self.calls: list[str] = []

    @staticmethod
    def render(messages: list[dict]) -> list[int]:
        def content(value) -> str:
            return value if isinstance(value, str) else orjson.dumps(value).decode()

        text = "".join(f"<{m['role']}>{content(m['content'])}\n" for m in messages)
        return [BOS, *(byte + 2 for byte in (text + "<assistant>").encode())]

    @staticmethod
    def encode(text: str) -> list[int]:
        return [BOS, *(byte + 2 for byte in text.encode())]

    def cached(self, prompt: list[int]) -> int:
        best = 0
        for earlier in self.seen:
            shared = 0
            for a, b in zip(prompt, earlier, strict=False):
                if a != b:
                    break
                shared += 1
            best = max(best, shared)
        usable = min(best, len(prompt) - 1)
        return usable // self.block_size * self.block_size

    def __call__(self, method: str, path: str, body: bytes):
        self.calls.append(path)
        if path == "/v1/models":
            return 200, {}, orjson.dumps({"data": [{"id": "fake-model"}]})
        if path == "/metrics":
            if self.publish != "metrics":
                return 404, {}, b""
            blocks = (
                "" if self.num_gpu_blocks is None else f',num_gpu_blocks="{self.num_gpu_blocks}"'
            )
            return (
                200,
                {},
                (
                    "# TYPE vllm:cache_config_info gauge\n"
                    f'vllm:cache_config_info{{block_size="{self.block_size}",cache_dtype="auto"'
                    f"{blocks}}} 1.0\n"
                    "# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total 0.0\n"
                ).encode(),
            )
        if path == "/get_server_info" and self.publish == "server_info":
            info = {"page_size": self.block_size, "model_path": "x"}
            if self.total_tokens is not None:  # newer releases: in the scheduler's state
                info["internal_states"] = [{"max_total_num_tokens": self.total_tokens}]
            return 200, {}, orjson.dumps(info)
        if path == "/reset_prefix_cache":
            self.seen.clear()
            return 200, {}, b""
        request = orjson.loads(body) if body else {}
        if path == "/tokenize" and self.tokenize:
            if "messages" in request:
                tokens = self.render(request["messages"])
            else:
                tokens = self.encode(request["prompt"])
            return (
                200,
                {},
                orjson.dumps({"tokens": tokens, "count": len(tokens), "max_model_len": 8192}),
            )
        if path == "/v1/chat/completions":
            prompt = self.render(request["messages"])
            cached = self.cached(prompt)
            self.seen.append(prompt)
            return 200, EVENTS, chat_stream(len(prompt), cached)
        if path == "/v1/completions":
            given = request["prompt"]
            prompt = self.encode(given) if isinstance(given, str) else list(given)
            if self.bos_on_ids and not isinstance(given, str):
                prompt = [BOS, *prompt]
            cached = self.cached(prompt)
            self.seen.append(prompt)
            return 200, EVENTS, completion_stream(len(prompt), cached)
        return 404, {}, orjson.dumps({"error": {"message": "not found"}})


def replay(cli, url: str, *flags, trace=TRACE) -> dict:
    result = cli(
        "replay", trace, "--endpoint", f"{url}/v1", "--reset-cache", "--max-concurrency", "1",
        "--time-scale", "0", "--format", "json", *flags,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def test_with_no_flags_the_prediction_uses_the_servers_block_size_and_tokens(cli):
    fake = FakeVllm(block_size=32)
    with fake_server(fake) as url:
        data = replay(cli, url)
    assert data["backend"] == "openai-chat"  # a trace of messages goes to the chat API
    assert data["model_id"] == "fake-model"
    assert data["block_size"] == 32
    assert data["block_size_source"] == "the server (vllm:cache_config_info in /metrics)"
    assert data["tokenization"] == "the server's /tokenize"
    assert data["completed"] == data["num_prompts"] == 4
    assert data["pcache_input_lens"] == data["input_lens"]  # the server's own counts
    assert data["prompt_tokens_mismatch"] is None
    assert data["cached_tokens"] == data["predicted_cached_tokens"]
    assert sum(data["cached_tokens"]) > 0 and all(c % 32 == 0 for c in data["cached_tokens"])
    assert not [note for note in data["notes"] if "differ" in note], data["notes"]


def test_the_text_output_says_where_the_block_size_and_tokens_came_from(cli):
    with fake_server(FakeVllm(block_size=32)) as url:
        result = cli("replay", TRACE, "--endpoint", f"{url}/v1", "--time-scale", "0")
    assert result.exit_code == 0, result.output
    assert "block size 32: the server (vllm:cache_config_info in /metrics)" in result.stdout
    assert "prompts tokenized by the server's /tokenize" in " ".join(result.stdout.split())


def test_a_given_block_size_wins_and_a_disagreement_is_a_note(cli):
    with fake_server(FakeVllm(block_size=64)) as url:
        data = replay(cli, url, "--block-size", "16")
    assert data["block_size"] == 16 and data["block_size_source"] == "given by --block-size"
    note = "the server's blocks are 64 tokens (vllm:cache_config_info in /metrics);"
    assert any(note in line for line in data["notes"]), data["notes"]
    assert data["cached_tokens"] != data["predicted_cached_tokens"]


def test_sglang_page_size_is_read_from_its_server_info(cli):
    with fake_server(FakeVllm(block_size=1, publish="server_info")) as url:
        data = replay(cli, url)
    assert data["block_size"] == 1
    assert data["block_size_source"] == "the server (page_size at /get_server_info)"
    assert data["cached_tokens"] == data["predicted_cached_tokens"]


def test_a_server_that_publishes_nothing_leaves_the_default_and_says_so(cli):
    with fake_server(FakeVllm(block_size=16, publish="nothing")) as url:
        data = replay(cli, url)
    assert data["block_size"] == 16
    assert data["block_size_source"].startswith("the default (the server publishes no block")
    assert data["cached_tokens"] == data["predicted_cached_tokens"]


def test_without_tokenize_the_local_count_differs_and_the_note_names_the_template(cli):
    with fake_server(FakeVllm(tokenize=False)) as url:
        data = replay(cli, url)
    assert data["tokenization"] == "pcache's gpt-oss tokenizer"
    assert any("tokenized with pcache's gpt-oss tokenizer" in n for n in data["notes"])
    mismatch = data["prompt_tokens_mismatch"]
    assert mismatch["first"] == 0 and mismatch["requests"] == [0, 1, 2, 3]
    assert mismatch["server"] == data["input_lens"][0]
    assert mismatch["pcache"] == data["pcache_input_lens"][0] != mismatch["server"]
    assert "chat template" in mismatch["likely_cause"]
    note = next(n for n in data["notes"] if "prompt_tokens differ" in n)
    assert "in 4 of 4 requests (first: request 0," in note


def test_an_off_by_one_at_the_start_is_named_as_bos(cli, tmp_path):
    trace = tmp_path / "ids.jsonl"
    rows = [{"token_ids": [*range(10, 80), i], "output_length": 2} for i in range(3)]
    trace.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    with fake_server(FakeVllm(bos_on_ids=True)) as url:
        data = replay(cli, url, trace=trace)
    assert data["backend"] == "openai"  # token ids go to completions
    assert data["tokenization"] == "the trace's token ids"
    mismatch = data["prompt_tokens_mismatch"]
    assert (mismatch["first"], mismatch["server"], mismatch["pcache"]) == (0, 72, 71)
    assert "BOS" in mismatch["likely_cause"]


def test_text_prompts_are_tokenized_by_the_server_with_its_bos(cli, tmp_path):
    trace = tmp_path / "text.jsonl"
    shared = "The same long preamble for every request. " * 4
    rows = [{"prompt": shared + f"question {i}", "output_length": 2} for i in range(3)]
    trace.write_bytes(b"".join(orjson.dumps(row) + b"\n" for row in rows))
    fake = FakeVllm(block_size=32)
    with fake_server(fake) as url:
        data = replay(cli, url, trace=trace)
    assert data["backend"] == "openai" and data["tokenization"] == "the server's /tokenize"
    assert data["pcache_input_lens"] == [len(fake.encode(row["prompt"])) for row in rows]
    assert data["prompt_tokens_mismatch"] is None
    assert data["cached_tokens"] == data["predicted_cached_tokens"] == [0, 160, 160]


def test_hash_id_traces_go_to_completions(cli):
    trace = ROOT / "samples/traces/shared_prefix_hash_ids.jsonl"
    with fake_server(FakeVllm(block_size=16)) as url:
        data = replay(cli, url, "--limit", "3", trace=trace)
    assert data["backend"] == "openai"
    assert data["tokenization"] == "seeded tokens per hash id (the trace has no text)"
    assert data["cached_tokens"] == data["predicted_cached_tokens"]


class RenderingServer:
    """A server that renders chat requests with pcache's gpt-oss renderer, on its own date
    and with a BOS token of its own where asked: what -t's tokens are checked against."""

    def __init__(self, date: str, bos: bool = False) -> None:
        self.date, self.bos = date, bos

    def render(self, messages: list[dict]) -> list[int]:
        from pcache.prompt.renderers.interface import RenderOptions
        from pcache.prompt.renderers.render import prompt_token_ids, resolve_renderer
        from pcache.prompt.shapes.request import request_from_document

        request = request_from_document({"messages": messages}, "server")
        ids = prompt_token_ids(request, resolve_renderer("gpt-oss"), RenderOptions(date=self.date))
        return [BOS, *ids] if self.bos else list(ids)

    def __call__(self, method: str, path: str, body: bytes):
        if path == "/v1/models":
            return 200, {}, orjson.dumps({"data": [{"id": "m"}]})
        request = orjson.loads(body) if body else {}
        if path == "/tokenize":
            tokens = self.render(request["messages"])
            return 200, {}, orjson.dumps({"tokens": tokens, "count": len(tokens)})
        if path == "/v1/chat/completions":
            return 200, EVENTS, chat_stream(len(self.render(request["messages"])), 0)
        return 404, {}, b""


@pytest.mark.parametrize(
    ("server", "cause"),
    [
        (RenderingServer("2026-01-01"), None),
        (RenderingServer("2026-01-01", bos=True), "a BOS token the server adds"),
        (RenderingServer("2025-06-30"), None),
        (RenderingServer(TODAY), "the date: the template prints the date"),
    ],
    ids=["same", "bos", "other date", "today"],
)
def test_with_t_pcaches_tokens_are_checked_against_the_servers(cli, server, cause):
    if TODAY == "2026-01-01" and server.date == TODAY and cause:
        pytest.skip("today is --date's day: nothing to tell apart")
    with fake_server(server) as url:
        data = replay(cli, url, "-t", "gpt-oss", "--date", "2026-01-01")
    assert data["tokenization"] == "-t gpt-oss"
    mismatch = data["tokens_mismatch"]
    if server.date == "2026-01-01" and not server.bos:
        assert mismatch is None, data["notes"]
        return
    assert mismatch["request"] == 0
    if cause is not None and server.bos:
        assert mismatch["position"] == 0 and mismatch["cause"].startswith(cause)
    elif cause is not None:
        assert mismatch["position"] > 0 and mismatch["cause"].startswith(cause)
    else:  # the date differs, but today is not the server's: the template is named
        assert mismatch["position"] > 0
        assert "chat template" in mismatch["cause"]
    assert any("differ from the server's /tokenize from request 0" in n for n in data["notes"])


def test_the_python_api_replays_request_bodies_in_memory_the_same_way():
    import pcache

    system = {"role": "system", "content": "A shared system prompt of some length. " * 10}
    bodies = [{"messages": [system, {"role": "user", "content": f"Q{i}?"}]} for i in range(3)]
    with fake_server(FakeVllm(block_size=32)) as url:
        result = pcache.replay(
            bodies, mode="endpoint", url=f"{url}/v1", reset_cache=True, max_concurrency=1
        )
    data = result.to_dict()
    assert data["backend"] == "openai-chat" and data["tokenization"] == "the server's /tokenize"
    assert data["cached_tokens"] == data["predicted_cached_tokens"] and data["cached_tokens"][1] > 0


def test_a_block_size_given_to_the_python_api_wins_too():
    import pcache

    bodies = [{"token_ids": [*range(5, 60), i]} for i in range(2)]
    with fake_server(FakeVllm(block_size=32)) as url:
        given = pcache.replay(bodies, mode="endpoint", url=f"{url}/v1", block_size=16)
        learned = pcache.replay(bodies, mode="endpoint", url=f"{url}/v1")
    assert given.to_dict()["block_size"] == 16
    assert given.to_dict()["block_size_source"] == "given by --block-size"
    assert learned.to_dict()["block_size"] == 32


def test_the_prediction_replays_the_pool_the_server_publishes(cli):
    with fake_server(FakeVllm(block_size=16, num_gpu_blocks=4096)) as url:
        data = replay(cli, url)
        given = replay(cli, url, "--cache-blocks", "100")
        text = cli("replay", TRACE, "--endpoint", f"{url}/v1", "--time-scale", "0")
    assert data["capacity_blocks"] == 4095  # vLLM's null block holds no prompt
    source = "the server's num_gpu_blocks=4096 (vllm:cache_config_info in /metrics) less the null"
    assert data["capacity_source"].startswith(source)
    assert data["prediction_mode"] == "serial"
    assert data["cached_tokens"] == data["predicted_cached_tokens"]
    assert given["capacity_blocks"] == 100 and given["capacity_source"] == "given by --cache-blocks"
    assert text.exit_code == 0, text.output
    assert "4,095 blocks (the server's num_gpu_blocks=4096 (vllm:cache_config_info" in " ".join(
        text.stdout.split()
    )


def test_sglang_token_capacity_becomes_blocks_of_its_page_size(cli):
    fake = FakeVllm(block_size=4, publish="server_info", total_tokens=10_003)
    with fake_server(fake) as url:
        data = replay(cli, url)
    assert data["capacity_blocks"] == 2500
    assert data["capacity_source"] == (
        "the server's max_total_num_tokens=10003 at /get_server_info in 4-token blocks"
    )


def test_without_a_published_pool_the_prediction_is_unlimited_and_says_so(cli):
    with fake_server(FakeVllm(block_size=16)) as url:
        data = replay(cli, url)
    assert data["capacity_blocks"] is None
    assert data["capacity_source"].startswith("unlimited: the server publishes no pool size")
    total = data["miss_reasons"]
    assert sum(total.values()) == sum(data["input_lens"]) - sum(data["cached_tokens"])
