"""OpenAI and vLLM parameters `pcache serve` knows but does not implement.

Each is accepted at the value that changes nothing (its default, e.g. `top_p` 1 or `n` 1) and
refused with a 400 naming it at any other value: a client asking for something is told it will
not get it, never answered as if it had. Parameters this table and `protocol.py` do not name
are ignored with a warning, as vLLM ignores unknown fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from pcache.serve.api_error import bad_request


def _absent(value: Any) -> bool:
    return value is None


def _empty(value: Any) -> bool:
    return value is None or value == {} or value == []


def _equals(*neutral: Any) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        if value is None:
            return True
        if type(value) is bool:  # `True == 1` in Python; JSON's true is not the number 1
            return any(type(item) is bool and item == value for item in neutral)
        number = type(value) in (int, float) and math.isfinite(value)
        return any(value == item and (number or type(item) is type(value)) for item in neutral)

    return check


def _text_format(value: Any) -> bool:
    return value is None or (isinstance(value, dict) and value.get("type") == "text")


def _text_only(value: Any) -> bool:
    return value is None or value == ["text"]


def _no_forced_tool(value: Any) -> bool:
    return value is None or value in ("none", "auto")


# (parameter, accepted value, what the refusal says is missing); both APIs
COMMON: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("top_p", _equals(1), "nucleus sampling (`top_p` < 1)"),
    ("top_k", _equals(-1, 0), "top-k sampling"),
    ("min_p", _equals(0), "min-p sampling"),
    ("presence_penalty", _equals(0), "presence penalties"),
    ("frequency_penalty", _equals(0), "frequency penalties"),
    ("repetition_penalty", _equals(1), "repetition penalties"),
    ("logit_bias", _empty, "logit biases"),
    ("bad_words", _empty, "bad words"),
    ("allowed_token_ids", _absent, "allowed token ids"),
    ("min_tokens", _equals(0), "a minimum number of tokens"),
    ("prompt_logprobs", _absent, "prompt logprobs"),
    ("truncate_prompt_tokens", _absent, "prompt truncation"),
    ("priority", _equals(0), "request priorities"),
    ("response_format", _text_format, "structured output (`response_format` other than text)"),
    ("structured_outputs", _absent, "structured output"),
    ("guided_json", _absent, "guided decoding"),
    ("guided_regex", _absent, "guided decoding"),
    ("guided_choice", _absent, "guided decoding"),
    ("guided_grammar", _absent, "guided decoding"),
    ("skip_special_tokens", _equals(True), "keeping special tokens in the text"),
    ("spaces_between_special_tokens", _equals(True), "joining special tokens without spaces"),
    ("kv_transfer_params", _absent, "KV transfer"),
    ("vllm_xargs", _absent, "vLLM extension arguments"),
    ("lora_request", _absent, "LoRA adapters"),
)
COMPLETIONS = (
    ("best_of", _equals(1), "`best_of` above 1"),
    ("suffix", _absent, "suffixes (insertion)"),
)
CHAT = (
    ("functions", _absent, "legacy functions (use `tools`)"),
    ("function_call", _absent, "legacy function calls (use `tools`)"),
    ("tool_choice", _no_forced_tool, "forcing a tool call (`tool_choice` other than none/auto)"),
    ("audio", _absent, "audio output"),
    ("modalities", _text_only, "output modalities other than text"),
    ("prediction", _absent, "predicted outputs"),
    ("web_search_options", _absent, "web search"),
    ("reasoning_effort", _absent, "reasoning effort"),
    ("verbosity", _absent, "verbosity"),
    ("chat_template", _absent, "a chat template sent with the request"),
    ("chat_template_kwargs", _empty, "chat template arguments"),
    ("add_generation_prompt", _equals(True), "rendering without the generation prompt"),
    ("continue_final_message", _equals(False), "continuing the final message"),
    ("documents", _absent, "documents"),
    ("mm_processor_kwargs", _absent, "multimodal inputs"),
    ("add_special_tokens", _equals(False), "special tokens added to a rendered chat"),
    ("echo", _equals(False), "echoing the last message"),
)


def refuse_unsupported(body: dict, chat: bool) -> None:
    """Raise a 400 naming the first known parameter asked for at a value not implemented."""
    for key, accepted, what in (*COMMON, *(CHAT if chat else COMPLETIONS)):
        if key in body and not accepted(body[key]):
            raise bad_request(f"`{key}`: {what} is not supported by pcache serve", key)
