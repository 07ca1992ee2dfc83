"""Prompts as the server counts them: its `/tokenize`, and its usage against pcache's count.

Without `-t`, a request trace's prompts are tokenized by the server itself, so that the
prediction hashes the tokens the server will see, with its own chat template and BOS: `POST
/tokenize` (vLLM's auxiliary API, which pcache serve and SGLang also speak) with the
request's `messages` (and `tools`, `add_generation_prompt`), or its text `prompt` (with the
tokenizer's special tokens). Where the server has no /tokenize, pcache's own tokenizer
counts them, and the report says so.

After the replay, each request's reported `prompt_tokens` is compared with the count the
prediction used; a difference is a note naming the first request that differs and what
likely caused it (a BOS token, the chat template, the date it prints).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import orjson

from pcache.prompt.shapes.fields import json_kind
from pcache.replayer.endpoint.options import EndpointOptions
from pcache.replayer.endpoint.reported_cache import MAX_REQUEST_TOKENS
from pcache.replayer.endpoint.requests import TEMPLATE_KEYS as TEMPLATE_KEYS
from pcache.replayer.endpoint.requests import chat_fields
from pcache.replayer.endpoint.server import SideFailure, side_request

TOKENIZE_ROUTES = (("root", "/tokenize"), ("api", "/tokenize"))
"""vLLM serves /tokenize beside /v1; some servers put it under /v1."""
TOKENIZE_CONCURRENCY = 8
MAX_TOKEN_ID = 1 << 32


@dataclass(frozen=True, slots=True)
class Tokenization:
    """Where the prediction's token ids came from."""

    kind: str
    """`server` (its /tokenize), `local` (pcache's tokenizer), `trace` (the trace's token
    ids) or `hash-ids` (seeded tokens per block id)."""
    source: str
    """The same in words, as the report shows it."""


def tokenize_body(request: Any, model: str) -> dict[str, Any] | None:
    """The /tokenize body of a request (`pcache.prompt.shapes.request.Request`); None when the
    request carries its own token ids or has neither messages nor a text prompt."""
    if request.token_ids is not None:
        return None
    fields = chat_fields(request) if request.messages else None
    if fields and fields["messages"]:
        return {"model": model, **fields, "add_generation_prompt": True}
    if isinstance(request.prompt, str):
        return {"model": model, "prompt": request.prompt, "add_special_tokens": True}
    return None


def _tokens_of(data: bytes) -> list[int]:
    try:
        answer = orjson.loads(data)
    except orjson.JSONDecodeError:
        raise SideFailure("its answer is not JSON") from None
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    if not isinstance(tokens, list) or not tokens or len(tokens) > MAX_REQUEST_TOKENS:
        raise SideFailure(f"its `tokens` is {json_kind(tokens)}, not a list of token ids")
    if any(type(token) is not int or not 0 <= token < MAX_TOKEN_ID for token in tokens):
        raise SideFailure("its `tokens` holds a value that is not a token id")
    count = answer.get("count")
    if count is not None and count != len(tokens):
        raise SideFailure(f"its `count` {count!r} is not the {len(tokens)} tokens it lists")
    return tokens


async def server_tokens(
    client: Any,
    options: EndpointOptions,
    bodies: list[dict[str, Any] | None],
    secrets: list[str] | tuple = (),
) -> list[list[int] | None]:
    """Each body's token ids from the server's /tokenize (None where the body is None);
    `SideFailure` (the reason) when the server has none or one answer is unusable."""
    first = next((index for index, body in enumerate(bodies) if body is not None), None)
    if first is None:
        return [None] * len(bodies)
    url = None
    for where, path in TOKENIZE_ROUTES:
        candidate = options.root_route(path) if where == "root" else options.route(path)
        status, data = await side_request(
            client, options, "POST", candidate, bodies[first], secrets
        )
        if status in (404, 405):
            continue
        if status != 200:
            raise SideFailure(f"/tokenize answered HTTP {status}: {_quoted(data)}")
        url = candidate
        break
    if url is None:
        raise SideFailure("the server has no /tokenize (HTTP 404)")
    results: list[list[int] | None] = [None] * len(bodies)
    results[first] = _tokens_of(data)
    semaphore = asyncio.Semaphore(TOKENIZE_CONCURRENCY)

    async def one(index: int) -> None:
        async with semaphore:
            status, answer = await side_request(
                client, options, "POST", url, bodies[index], secrets
            )
        if status != 200:
            raise SideFailure(f"/tokenize answered HTTP {status} for request {index}")
        results[index] = _tokens_of(answer)

    others = [i for i, body in enumerate(bodies) if body is not None and i != first]
    await asyncio.gather(*(one(index) for index in others))
    return results


def _quoted(data: bytes) -> str:
    from pcache.replayer.endpoint.url import scrub

    return scrub(data.decode("utf-8", "replace").strip()[:120], ())


def first_difference(
    local: list[list[int]], server: list[list[int] | None]
) -> tuple[int, int] | None:
    """(request, token position) where pcache's tokens first differ from the server's."""
    for index, (ours, theirs) in enumerate(zip(local, server, strict=True)):
        if theirs is None or ours == theirs:
            continue
        position = next(
            (at for at, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
            min(len(ours), len(theirs)),
        )
        return index, position
    return None


def token_cause(ours: list[int], theirs: list[int], position: int) -> str | None:
    """A BOS token one side has and the other lacks, when that is the whole difference."""
    if position == 0 and theirs[1:] == ours:
        return "a BOS token the server adds and pcache's tokens lack"
    if position == 0 and ours[1:] == theirs:
        return "a BOS token pcache adds and the server does not"
    return None


@dataclass(frozen=True, slots=True)
class PromptMismatch:
    """Requests whose reported prompt tokens differ from the count the prediction used."""

    requests: list[int]
    first: int
    server: int
    pcache: int
    likely_cause: str


def compare_prompt_tokens(
    reported: list[int | None],
    own: list[int],
    tokenization: Tokenization,
    api: str,
    tokenizer: str,
    date: str,
) -> PromptMismatch | None:
    """The requests whose server count differs from pcache's, and the likely cause."""
    differing = [
        index
        for index, (seen, counted) in enumerate(zip(reported, own, strict=True))
        if seen is not None and seen != counted
    ]
    if not differing:
        return None
    first = differing[0]
    differences = {reported[index] - own[index] for index in differing}
    return PromptMismatch(
        differing,
        first,
        reported[first],
        own[first],
        _likely_cause(differences, tokenization, api, tokenizer, date),
    )


def _likely_cause(
    differences: set[int], tokenization: Tokenization, api: str, tokenizer: str, date: str
) -> str:
    if differences == {1}:
        return (
            "one token more on the server's side, at the start: a BOS token the server adds"
            " and pcache's tokens lack"
        )
    if differences == {-1}:
        return "one token fewer on the server's side: a BOS token pcache counts and it does not"
    if tokenization.kind == "local" and api != "completions":
        return (
            f"the chat template: the server renders the messages with its own (and today's"
            f" date, where it prints one), pcache rendered them with {tokenizer} and --date"
            f" {date}; give -t the served model's directory, or serve /tokenize"
        )
    if tokenization.kind == "local":
        return f"the tokenizer: the server's is not pcache's {tokenizer} (give -t)"
    if tokenization.kind == "server":
        return (
            "the server rendered the request otherwise than its /tokenize did (a template"
            " that prints the date, or request fields the template reads)"
        )
    return "the server changed the prompt it was sent (cut it, or added tokens)"


def mismatch_note(mismatch: PromptMismatch, completed: int) -> str:
    return (
        f"the server's prompt_tokens differ from pcache's count in {len(mismatch.requests)}"
        f" of {completed} requests (first: request {mismatch.first}, server"
        f" {mismatch.server:,}, pcache {mismatch.pcache:,}); likely cause:"
        f" {mismatch.likely_cause}. The predictions for those requests hash pcache's tokens"
    )
