"""Text prompts get the special tokens the model's tokenizer adds, as transformers (and so
vLLM) encodes them with `add_special_tokens=True`; rendered chats do not (their template
writes them). Checked against transformers itself on the real tokenizer fixtures, through the
codec, the Hugging Face renderer, `pcache hash`, `pcache generate` and `pcache serve`."""

from __future__ import annotations

import json
import shutil

import pytest

from pcache.prompt.renderers.hf_template import load_hf_renderer
from pcache.prompt.renderers.render import render
from pcache.prompt.shapes.request import request_from_document
from pcache.prompt.tokenizers.codec import (
    ModelCodec,
    encode_text_prompt,
    encode_text_prompt_with_starts,
)
from tests.conftest import run_pcache
from tests.fixtures import hf_model_dir, hf_reference_tokenizer
from tests.fixtures.build_tokenizers import RECIPES

TEXTS = ("hello there", "", "  two  spaces\nand a line", "Ünïcode ✓ 数字 123456", "<|im_end|> x")
LLAMA3_BOS = 128000


def reference_ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=True)["input_ids"]


@pytest.mark.parametrize("model", list(RECIPES))
@pytest.mark.parametrize("text", TEXTS)
def test_text_prompt_ids_equal_transformers(model: str, text: str):
    directory = hf_model_dir(model)
    expected = reference_ids(hf_reference_tokenizer(model), text)
    renderer = load_hf_renderer(str(directory))
    assert encode_text_prompt(renderer, text) == expected
    codec = ModelCodec(str(directory), 1 << 20)
    assert encode_text_prompt(codec, text) == expected
    ids, starts = encode_text_prompt_with_starts(renderer, text)
    assert ids == expected and len(starts) == len(ids)
    assert starts == sorted(starts) and all(0 <= start <= len(text) for start in starts)


def test_hello_there_is_three_llama_3_2_tokens_with_its_bos():
    renderer = load_hf_renderer(str(hf_model_dir("llama3.2")))
    ids = encode_text_prompt(renderer, "hello there")
    assert len(ids) == 3 and ids[0] == LLAMA3_BOS
    assert renderer.encode("hello there") == ids[1:]  # rendered text: as it is


CONFIG_VARIANTS = {
    "llama3.1 add_bos_token": ("llama3.1", {"add_bos_token": True}),
    "llama3.2 no add_bos_token": ("llama3.2", {"add_bos_token": False}),
    "llama3.2 add_eos_token": ("llama3.2", {"add_eos_token": True}),
    "llama3.1 both": ("llama3.1", {"add_bos_token": True, "add_eos_token": True}),
    "qwen3 add_bos_token, no bos_token": ("qwen3", {"add_bos_token": True}),
}


@pytest.mark.parametrize("variant", list(CONFIG_VARIANTS))
def test_the_post_processor_decides_whatever_the_config_says_as_in_transformers(tmp_path, variant):
    """transformers 5 drops tokenizer_config.json's add_bos_token / add_eos_token when the
    model has a tokenizer.json: pcache does as it does."""
    from transformers import AutoTokenizer

    model, settings = CONFIG_VARIANTS[variant]
    directory = tmp_path / "model"
    shutil.copytree(hf_model_dir(model), directory)
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, **settings}))
    reference = AutoTokenizer.from_pretrained(str(directory))
    renderer = load_hf_renderer(str(directory))
    codec = ModelCodec(str(directory), 1 << 20)
    for text in TEXTS:
        expected = reference_ids(reference, text)
        assert encode_text_prompt(renderer, text) == expected, text
        assert encode_text_prompt(codec, text) == expected, text


def test_a_rendered_chat_keeps_its_templates_single_bos():
    import time

    from pcache.prompt.renderers.interface import RenderOptions

    renderer = load_hf_renderer(str(hf_model_dir("llama3.2")))
    messages = [{"role": "user", "content": "hello there"}]
    today = RenderOptions(date=time.strftime("%Y-%m-%d"))  # the date transformers prints
    rendered = render(request_from_document({"messages": messages}, "chat"), renderer, today)
    expected = hf_reference_tokenizer("llama3.2").apply_chat_template(
        messages, tokenize=True, add_generation_prompt=True, return_dict=False
    )
    assert rendered.token_ids == list(expected)
    assert rendered.token_ids.count(LLAMA3_BOS) == 1


def test_a_text_prompt_request_gets_the_bos(tmp_path):
    request = tmp_path / "prompt.json"
    request.write_text(json.dumps({"prompt": "hello there"}))
    done = run_pcache("hash", request, "-t", hf_model_dir("llama3.2"), "--format", "json")
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["num_tokens"] == 3
    done = run_pcache("hash", request, "-t", hf_model_dir("llama3.1"), "--format", "json")
    assert json.loads(done.stdout)["num_tokens"] == 2  # its tokenizer adds nothing


@pytest.fixture(scope="module")
def llama_model_dir(tmp_path_factory):
    """bench/vllm's model directory: random weights, the Llama 3.2 tokenizer (BOS first)."""
    pytest.importorskip("torch")
    pytest.importorskip("safetensors")
    hf_model_dir("llama3.2")  # skipped (or failed under CI) when the fixtures cannot be built
    from bench.vllm.model_dir import build_model_dir

    return build_model_dir(tmp_path_factory.mktemp("llama") / "model")


@pytest.mark.slow
def test_generate_and_serve_put_the_bos_before_a_text_prompt(llama_model_dir):
    import httpx

    from tests.serve_helpers import served

    done = run_pcache(
        "generate",
        "--model",
        llama_model_dir,
        "--prompt",
        "hello there",
        "-n",
        "1",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout)["prompt_tokens"] == [3]
    with served(model=str(llama_model_dir)) as (url, _):
        for prompt, expected in (("hello there", 3), ([15339, 1070], 2)):  # ids: as they are
            body = {"model": str(llama_model_dir), "prompt": prompt, "max_tokens": 1}
            answer = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()
            assert answer["usage"]["prompt_tokens"] == expected, prompt
