"""The same weights give the same greedy tokens from vLLM and from `pcache serve`.

Both serve the suite's model directory (random weights, real Llama 3.2 tokenizer and template);
each prompt is sent to both at temperature 0 with `ignore_eos`, so both generate every token:
text prompts to /v1/completions (both add the tokenizer's BOS) and chat messages to
/v1/chat/completions (both render the model's template, with today's date where it prints
one). The texts must be equal, and so must the reported prompt token counts.
"""

from __future__ import annotations

import httpx
import pytest

from tests.serve_helpers import serve_process
from tests.vllm.traces import PREFACE, QUESTIONS, SYSTEM

MAX_TOKENS = 8
TEXT_PROMPTS = ("hello there", f"{PREFACE}\n\nQuestion: {QUESTIONS[0]}\nAnswer:")
CHATS = (
    [{"role": "user", "content": "hello there"}],
    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTIONS[2]}],
)

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def pcache_url(model_dir):
    with serve_process("--model", str(model_dir), "--served-model-name", "model") as url:
        yield url


def completion(url: str, model: str, route: str, body: dict) -> tuple[str, int]:
    """The generated text and the prompt's token count."""
    request = {"model": model, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
    response = httpx.post(f"{url}/v1/{route}", json={**request, **body}, timeout=120)
    assert response.status_code == 200, response.text
    answer = response.json()
    choice = answer["choices"][0]
    text = choice["text"] if route == "completions" else choice["message"]["content"]
    return text, answer["usage"]["prompt_tokens"]


CASES = [("completions", {"prompt": prompt}) for prompt in TEXT_PROMPTS]
CASES += [("chat/completions", {"messages": messages}) for messages in CHATS]


@pytest.mark.parametrize(("route", "body"), CASES, ids=lambda value: str(value)[:24])
def test_greedy_outputs_of_vllm_and_pcache_serve_are_equal(
    vllm_url, pcache_url, record, route, body
):
    model = httpx.get(f"{vllm_url}/v1/models", timeout=30).json()["data"][0]["id"]
    vllm_text, vllm_prompt = completion(vllm_url, model, route, body)
    pcache_text, pcache_prompt = completion(pcache_url, "model", route, body)
    record(
        {
            "trace": f"greedy {route}",
            "request": repr(str(body)[:30]),
            "vllm_tokenize": vllm_prompt,
            "pcache_prompt": pcache_prompt,
            "vllm_text": repr(vllm_text),
            "pcache_text": repr(pcache_text),
        }
    )
    assert pcache_prompt == vllm_prompt
    assert pcache_text == vllm_text
