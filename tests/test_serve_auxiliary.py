"""vLLM's auxiliary API in `pcache serve`: /tokenize, /detokenize, /version, cache_config_info."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import metric, served  # noqa: E402

MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello!"}]


def post(url: str, route: str, body) -> httpx.Response:
    return httpx.post(f"{url}{route}", json=body, timeout=30)


@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory):
    """A random-weight Qwen3-shaped checkpoint with Qwen3's real tokenizer and template."""
    import shutil

    from tests.fixtures import hf_model_dir
    from tests.serve_helpers import write_random_checkpoint

    directory = tmp_path_factory.mktemp("qwen3")
    source = hf_model_dir("qwen3")
    write_random_checkpoint("tiny-qwen3", directory, vocab_size=151936)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(source / name, directory / name)
    return directory


@pytest.mark.parametrize("model", ["tiny", "qwen3"])
def test_tokenize_counts_what_the_generation_routes_count(model, qwen3_dir):
    with served(model="tiny" if model == "tiny" else str(qwen3_dir)) as (url, server):
        name = server.model_name
        text = post(url, "/tokenize", {"model": name, "prompt": "hello there, friend"}).json()
        completion = post(
            url, "/v1/completions", {"prompt": "hello there, friend", "max_tokens": 1}
        )
        assert text["count"] == len(text["tokens"]) == completion.json()["usage"]["prompt_tokens"]
        assert text["max_model_len"] == server.engine.runner.max_model_len
        assert text["tokens"] == server.codec.encode("hello there, friend")
        assert text["token_strs"] is None
        chat = post(url, "/tokenize", {"messages": MESSAGES}).json()
        answer = post(url, "/v1/chat/completions", {"messages": MESSAGES, "max_tokens": 1})
        assert chat["count"] == answer.json()["usage"]["prompt_tokens"]
        assert chat["tokens"] == server.codec.render_chat(MESSAGES, None)
        plain = post(url, "/tokenize", {"prompt": "hello", "add_special_tokens": False}).json()
        assert plain["tokens"] == server.codec.encode("hello", add_special_tokens=False)
        named = post(url, "/tokenize", {"prompt": "hello", "return_token_strs": True}).json()
        assert named["token_strs"] == [server.codec.token_text(t) for t in named["tokens"]]
        back = post(url, "/detokenize", {"tokens": plain["tokens"]}).json()
        assert back == {"prompt": "hello"}


def test_bad_auxiliary_requests_get_openai_errors_naming_the_field():
    with served() as (url, _):
        cases = [
            ("/tokenize", {"prompt": 5}, "prompt"),
            ("/tokenize", {}, "prompt"),
            ("/tokenize", {"messages": "hi"}, "messages"),
            ("/tokenize", {"messages": MESSAGES, "add_generation_prompt": False},
             "add_generation_prompt"),
            ("/tokenize", {"prompt": "x", "add_special_tokens": "yes"}, "add_special_tokens"),
            ("/detokenize", {"tokens": [1, 512]}, "tokens"),
            ("/detokenize", {"tokens": "abc"}, "tokens"),
            ("/detokenize", {"tokens": [True]}, "tokens"),
            ("/tokenize", {"prompt": "x", "model": "other"}, "model"),
        ]  # fmt: skip
        for route, body, param in cases:
            response = post(url, route, body)
            assert 400 <= response.status_code < 500, (body, response.text)
            assert response.json()["error"]["param"] == param, (body, response.text)
        not_json = httpx.post(f"{url}/tokenize", content=b"{", timeout=10)
        assert not_json.status_code == 400 and "not valid JSON" in not_json.text
        assert httpx.get(f"{url}/tokenize").status_code == 405


def test_version_and_the_cache_config_gauge():
    from pcache import __version__

    with served(block_size=32) as (url, server):
        assert httpx.get(f"{url}/version").json() == {"version": __version__}
        text = httpx.get(f"{url}/metrics").text
        labels = {
            "block_size": "32",
            "cache_dtype": "float32",
            "enable_prefix_caching": "True",
            "num_gpu_blocks": str(server.engine.runner.num_blocks),
            "prefix_caching_hash_algo": server.engine.config.hash_algo,
        }
        assert metric(text, "pcache:cache_config_info", **labels) == 1
        assert 'pcache:cache_config_info{block_size="32"' in text  # what clients grep for
    with served(enable_prefix_caching=False) as (url, _):
        text = httpx.get(f"{url}/metrics").text
        assert metric(text, "pcache:cache_config_info", enable_prefix_caching="False") == 1
