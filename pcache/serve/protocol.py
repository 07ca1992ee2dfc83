"""The OpenAI request bodies `pcache serve` accepts, checked into one `GenerationRequest`.

Honoured: `/v1/completions` (`prompt`: a string or a list of token ids, `echo`, integer
`logprobs`) and `/v1/chat/completions` (`messages`, `tools`, `logprobs` + `top_logprobs`),
with `max_tokens` (or `max_completion_tokens`), `temperature`, `stop`, `stream`,
`stream_options.include_usage`, `n` = 1, `seed` with greedy sampling, and vLLM's
`ignore_eos`, `cache_salt`, `stop_token_ids`, `include_stop_str_in_output` and (completions)
`add_special_tokens`. Known parameters asked for at a value pcache does not implement are
refused by `unsupported.py`; informational ones (`user`, `metadata`, ...) are checked and
ignored; unknown ones are ignored with a warning, as vLLM does. Every refusal is an
`ApiError` (400) naming the parameter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pcache.defaults import GREEDY_BELOW
from pcache.serve import fields
from pcache.serve.api_error import bad_request

DEFAULT_MAX_TOKENS = 16
MAX_LOGPROBS = 20
"""vLLM's default `max_logprobs`: the most alternatives a token's logprobs list."""
MAX_STOP_STRINGS = 64


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """A checked request body: what to generate and how to answer."""

    chat: bool
    model: str | None
    prompt: str | list[int] | None
    messages: list[dict[str, Any]] | None
    tools: list[Any] | None
    max_tokens: int
    max_tokens_param: str
    """The field `max_tokens` came from (chat's `max_completion_tokens` or `max_tokens`)."""
    temperature: float
    """What the engine samples with: 0 (greedy) for anything below `GREEDY_BELOW`."""
    stream: bool
    include_usage: bool
    ignore_eos: bool
    cache_salt: str | None
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    include_stop_str_in_output: bool = False
    logprobs: int | None = None
    """Alternatives per token (0: the sampled token's logprob alone); None: no logprobs."""
    echo: bool = False
    add_special_tokens: bool = True


KNOWN_COMMON = frozenset(
    {
        "model", "n", "max_tokens", "temperature", "stream", "stream_options", "stop",
        "stop_token_ids", "include_stop_str_in_output", "logprobs", "ignore_eos", "cache_salt",
        "seed", "user", "metadata", "store", "service_tier", "prompt_cache_key",
        "safety_identifier", "request_id",
    }
)  # fmt: skip
KNOWN_COMPLETIONS = frozenset({"prompt", "echo", "add_special_tokens"})
KNOWN_CHAT = frozenset(
    {"messages", "tools", "parallel_tool_calls", "top_logprobs", "max_completion_tokens"}
)


def _prompt(body: dict) -> str | list[int]:
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        if not prompt:
            raise bad_request("`prompt` must not be empty", "prompt")
        return prompt
    if isinstance(prompt, list) and prompt and all(type(t) is int and t >= 0 for t in prompt):
        return prompt
    if (
        isinstance(prompt, list)
        and len(prompt) > 1
        and all(isinstance(p, (str, list)) for p in prompt)
    ):
        raise bad_request("a batch of several prompts is not supported; send one", "prompt")
    raise bad_request(
        "`prompt` must be a non-empty string or a list of non-negative token ids", "prompt"
    )


def messages_of(body: dict) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("`messages` must be a non-empty list", "messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise bad_request(f"`messages[{index}]` must be an object with a `role`", "messages")
    return messages


def tools_of(body: dict) -> list[Any] | None:
    tools = fields.optional_list(body, "tools")
    if tools and not all(isinstance(tool, dict) for tool in tools):
        raise bad_request("`tools` must be a list of objects", "tools")
    return tools or None


def _max_tokens(body: dict, chat: bool) -> tuple[int, str]:
    """`max_completion_tokens` (chat) wins over `max_tokens`; each is checked under its name."""
    chosen: tuple[int, str] | None = None
    for key in ("max_completion_tokens", "max_tokens") if chat else ("max_tokens",):
        value = body.get(key)
        if value is not None:
            if type(value) is not int or value < 1:
                raise bad_request(f"`{key}` must be a positive integer", key)
            chosen = chosen or (value, key)
    return chosen or (DEFAULT_MAX_TOKENS, "max_tokens")


def _logprobs(body: dict, chat: bool) -> int | None:
    if not chat:
        return fields.optional_int(body, "logprobs", 0, MAX_LOGPROBS)
    wanted = fields.optional_bool(body, "logprobs")
    top = fields.optional_int(body, "top_logprobs", 0, MAX_LOGPROBS)
    if top is not None and not wanted:
        raise bad_request("`top_logprobs` needs `logprobs` true", "top_logprobs")
    return (top or 0) if wanted else None


def _check_sampling_ranges(body: dict) -> None:
    """Ranges first (a malformed value is named as such), then `unsupported.py` refuses the
    values that would change the sampling."""
    fields.optional_number(body, "top_p", 0.0, 1.0, low_open=True)
    fields.optional_number(body, "min_p", 0.0, 1.0)
    fields.optional_number(body, "presence_penalty", -2.0, 2.0)
    fields.optional_number(body, "frequency_penalty", -2.0, 2.0)
    fields.optional_number(body, "repetition_penalty", 0.0, 2.0, low_open=True)
    fields.optional_int(body, "top_k", -1)
    fields.optional_int(body, "best_of", 1)
    fields.optional_int(body, "min_tokens", 0)
    fields.optional_object(body, "logit_bias")


def _check_informational(body: dict) -> None:
    """Fields that describe the request without changing its answer: typed, then ignored."""
    for key in ("user", "service_tier", "prompt_cache_key", "safety_identifier", "request_id"):
        fields.optional_str(body, key)
    fields.optional_object(body, "metadata")
    fields.optional_bool(body, "store")
    fields.optional_bool(body, "parallel_tool_calls")


def unknown_fields(body: dict, chat: bool) -> list[str]:
    """Top-level fields neither honoured, informational nor refused (ignored, with a warning)."""
    from pcache.serve.unsupported import CHAT, COMMON, COMPLETIONS

    refused = {key for key, _, _ in (*COMMON, *(CHAT if chat else COMPLETIONS))}
    known = KNOWN_COMMON | (KNOWN_CHAT if chat else KNOWN_COMPLETIONS) | refused
    return sorted(str(key) for key in body if key not in known)


def parse_request(body: Any, chat: bool) -> GenerationRequest:
    """Check a decoded JSON body; raises ApiError(400) naming the parameter at fault."""
    from pcache.serve.unsupported import refuse_unsupported

    if not isinstance(body, dict):
        raise bad_request("the request body must be a JSON object")
    n = fields.optional_int(body, "n", 1)
    if n not in (None, 1):
        raise bad_request("only `n` = 1 is supported", "n")
    max_tokens, max_tokens_param = _max_tokens(body, chat)
    temperature = fields.optional_number(body, "temperature", 0.0, 2.0)
    temperature = 1.0 if temperature is None else temperature
    _check_sampling_ranges(body)
    seed = body.get("seed")
    if seed is not None and (type(seed) is not int or not -(2**63) <= seed < 2**64):
        raise bad_request("`seed` must be a 64-bit integer", "seed")
    if seed is not None and temperature >= GREEDY_BELOW:
        raise bad_request(
            "a per-request `seed` is supported with `temperature` 0 only (the server samples"
            " from one seeded generator)",
            "seed",
        )
    refuse_unsupported(body, chat)
    _check_informational(body)
    stream_options = fields.optional_object(body, "stream_options")
    stream = bool(fields.optional_bool(body, "stream"))
    if stream_options is not None and not stream:
        raise bad_request("`stream_options` needs `stream` true", "stream_options")
    include_usage = (stream_options or {}).get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise bad_request("`stream_options.include_usage` must be a boolean", "stream_options")
    if (stream_options or {}).get("continuous_usage_stats"):
        raise bad_request(
            "`stream_options.continuous_usage_stats` is not supported", "stream_options"
        )
    logprobs = _logprobs(body, chat)
    echo = False if chat else bool(fields.optional_bool(body, "echo"))
    if echo and logprobs is not None:
        raise bad_request("`echo` with `logprobs` needs prompt logprobs, not computed", "echo")
    add_special_tokens = True if chat else fields.optional_bool(body, "add_special_tokens")
    return GenerationRequest(
        chat=chat,
        model=fields.optional_str(body, "model"),
        prompt=None if chat else _prompt(body),
        messages=messages_of(body) if chat else None,
        tools=tools_of(body) if chat else None,
        max_tokens=max_tokens,
        max_tokens_param=max_tokens_param,
        temperature=0.0 if temperature < GREEDY_BELOW else temperature,
        stream=stream,
        include_usage=include_usage,
        ignore_eos=bool(fields.optional_bool(body, "ignore_eos")),
        cache_salt=fields.optional_str(body, "cache_salt"),
        stop=fields.string_list(body, "stop", MAX_STOP_STRINGS),
        stop_token_ids=fields.token_id_list(body, "stop_token_ids"),
        include_stop_str_in_output=bool(fields.optional_bool(body, "include_stop_str_in_output")),
        logprobs=logprobs,
        echo=echo,
        add_special_tokens=add_special_tokens is not False,
    )
