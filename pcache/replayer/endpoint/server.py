"""The requests `replay --endpoint` makes beside the replayed ones: headers with the API key
(never printed: messages are scrubbed of it and of the URL's credentials), `/metrics`
scrapes, prefix-cache resets, the model a server lists, and the block size it publishes.

Every side request has a deadline (`EndpointOptions.side_deadline_s`) and a bounded body
(`pcache.replayer.endpoint.reading`); one that fails says why, in a message that shows the
URL masked.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import orjson

from pcache.defaults import MAX_BLOCK_SIZE
from pcache.errors import OptionError, UsageError
from pcache.prompt.shapes.fields import json_kind
from pcache.replayer.endpoint.options import EndpointOptions
from pcache.replayer.endpoint.reading import (
    ACCEPT_ENCODING,
    MAX_SIDE_BYTES,
    ResponseTooLarge,
    UnsupportedEncoding,
    read_body,
)
from pcache.replayer.endpoint.server_metrics import MetricsSnapshot, parse_metrics
from pcache.replayer.endpoint.url import masked, scrub, secrets_of

RESET_ROUTES = {"sglang": ("/flush_cache",), None: ("/reset_prefix_cache", "/flush_cache")}
SERVER_INFO_ROUTES = ("/get_server_info", "/server_info")
"""SGLang's server arguments (`page_size`: tokens per page of its radix cache) and state
(`max_total_num_tokens`: the tokens its KV pool holds)."""
MAX_MODEL_ID = 1024
"""A model id longer than this is no name (it would be sent in every request)."""
METRICS_SOURCES = {"vllm": "vllm:cache_config_info", "pcache": "pcache:cache_config_info"}


class SideFailure(Exception):
    """A side request that got no usable answer; the message says why (URL masked)."""


def headers_for(options: EndpointOptions) -> tuple[dict[str, str], list[str]]:
    """Request headers and the secrets never to print (the API key, the URL's credentials)."""
    variable = options.api_key_env or (
        "ANTHROPIC_API_KEY" if options.api == "anthropic" else "OPENAI_API_KEY"
    )
    secret = os.environ.get(variable) or None
    headers = {"content-type": "application/json", "accept-encoding": ACCEPT_ENCODING}
    if options.api == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if secret:
            headers["x-api-key"] = secret
    elif secret:
        headers["authorization"] = f"Bearer {secret}"
    secrets = secrets_of(options.url)
    if secret:
        secrets.insert(0, secret)
    return headers, secrets


async def side_request(
    client: Any,
    options: EndpointOptions,
    method: str,
    url: str,
    body: Any = None,
    secrets: list[str] | tuple[str, ...] = (),
) -> tuple[int, bytes]:
    """(status, body) of one side request, within its deadline and size; `SideFailure`."""
    import httpx

    async def exchange() -> tuple[int, bytes]:
        content = None if body is None else orjson.dumps(body)
        async with client.stream(method, url, content=content) as response:
            limit = MAX_SIDE_BYTES if response.status_code == 200 else 4096
            data = await read_body(response, limit, truncate=response.status_code != 200)
            return response.status_code, data

    where = masked(url)
    deadline = options.side_deadline_s
    try:
        return await asyncio.wait_for(exchange(), deadline)
    except asyncio.TimeoutError:
        raise SideFailure(f"{where}: no complete answer within {deadline:g} s") from None
    except httpx.HTTPError as error:
        message = scrub(f"{type(error).__name__}: {error}", secrets)
        raise SideFailure(f"{where} unreachable ({message})") from None
    except (ResponseTooLarge, UnsupportedEncoding) as error:
        raise SideFailure(f"{where}: {error}") from None


async def scrape(
    client: Any, options: EndpointOptions, secrets: list[str] | tuple[str, ...] = ()
) -> tuple[MetricsSnapshot | None, str | None]:
    """The server's /metrics, or None and why not."""
    url = options.root_route("/metrics")
    for attempt in range(options.retries + 1):  # a GET: safe to repeat
        try:
            status, data = await side_request(client, options, "GET", url, secrets=secrets)
        except SideFailure as failure:
            if attempt == options.retries or "unreachable" not in str(failure):
                return None, str(failure)
            await asyncio.sleep(0.2 * (attempt + 1))
            continue
        if status != 200:
            return None, f"{masked(url)} answered HTTP {status}"
        try:
            return parse_metrics(data.decode("utf-8", "replace")), None
        except (ValueError, TypeError, KeyError, IndexError) as error:
            return None, f"{masked(url)} is not Prometheus text ({scrub(str(error)[:200], ())})"
    return None, f"{masked(url)} unreachable"


async def reset_cache(
    client: Any, options: EndpointOptions, kind: str | None, secrets: list[str] | tuple = ()
) -> str | None:
    """Reset the server's prefix cache; the route that worked (the first that does), or None.
    Each route is tried within the side deadline."""
    for route in RESET_ROUTES.get(kind, RESET_ROUTES[None]):
        try:
            url = options.root_route(route)
            status, _ = await side_request(client, options, "POST", url, secrets=secrets)
        except SideFailure:
            continue
        if status == 200:
            return route
    return None


async def served_model(
    client: Any, options: EndpointOptions, secrets: list[str] | tuple = ()
) -> str:
    """The one model a server lists at /v1/models (when --model was not given)."""
    url = options.route("/models")
    try:
        status, data = await side_request(client, options, "GET", url, secrets=secrets)
        if status != 200:
            raise SideFailure(f"HTTP {status}")
        cards = orjson.loads(data).get("data")
        if not isinstance(cards, list):
            raise SideFailure(f"its `data` is {json_kind(cards)}, not a list")
        names = [card.get("id") if isinstance(card, dict) else None for card in cards]
    except (SideFailure, orjson.JSONDecodeError, AttributeError) as error:
        message = scrub(str(error) or type(error).__name__, secrets)
        raise UsageError(
            f"--model not given and {masked(url)} did not list one ({message})"
        ) from None
    odd = [
        name
        for name in names
        if not isinstance(name, str) or not name.isprintable() or not 0 < len(name) <= MAX_MODEL_ID
    ]
    if odd:
        kind = f"{scrub(odd[0][:80], ())!r}" if isinstance(odd[0], str) else json_kind(odd[0])
        raise UsageError(
            f"--model not given and {masked(url)} lists a model whose id is {kind}; give --model"
        )
    if len(names) != 1:
        shown = ", ".join(name[:80] for name in names[:5])
        raise OptionError("model", f"not given; {masked(url)} lists {len(names)}: {shown}")
    return names[0]


@dataclass(frozen=True, slots=True)
class ServerBlockSize:
    """The block size a server publishes, and where it says so."""

    size: int
    source: str


async def server_block_size(
    client: Any,
    options: EndpointOptions,
    metrics: MetricsSnapshot | None,
    secrets: list[str] | tuple = (),
) -> ServerBlockSize | None:
    """The server's KV block size: vLLM's and pcache serve's `cache_config_info` gauge in
    /metrics, else SGLang's server info (`page_size`); None when it publishes none."""
    if metrics is not None and metrics.block_size is not None:
        name = METRICS_SOURCES.get(metrics.kind or "", "cache_config_info")
        return ServerBlockSize(metrics.block_size, f"{name} in /metrics")
    if metrics is not None and metrics.kind in ("vllm", "pcache"):
        return None  # these publish it in /metrics or nowhere
    async for route, info in server_infos(client, options, secrets):
        size = info.get("page_size")
        if type(size) is int and 0 < size <= MAX_BLOCK_SIZE:
            return ServerBlockSize(size, f"page_size at {route}")
    return None


async def server_infos(
    client: Any, options: EndpointOptions, secrets: list[str] | tuple = ()
) -> AsyncIterator[tuple[str, dict]]:
    """SGLang's server info at each of `SERVER_INFO_ROUTES` that answers with a JSON object:
    (route, info)."""
    for route in SERVER_INFO_ROUTES:
        url = options.root_route(route)
        try:
            status, data = await side_request(client, options, "GET", url, secrets=secrets)
            info = orjson.loads(data) if status == 200 else None
        except (SideFailure, orjson.JSONDecodeError):
            continue
        if isinstance(info, dict):
            yield route, info


@dataclass(frozen=True, slots=True)
class ServerCapacity:
    """The blocks of a server's KV pool that prompts can use, and where it says so."""

    blocks: int
    source: str


async def server_capacity(
    client: Any,
    options: EndpointOptions,
    metrics: MetricsSnapshot | None,
    block_size: int,
    secrets: list[str] | tuple = (),
) -> ServerCapacity | None:
    """vLLM's and pcache serve's `num_gpu_blocks` (`cache_config_info` in /metrics) less the
    null block both keep, else SGLang's `max_total_num_tokens` in `block_size`-token blocks;
    None when the server publishes neither."""
    from pcache.replayer.simulate.driver import MAX_CACHE_BLOCKS

    published = (metrics.cache_config if metrics is not None else {}).get("num_gpu_blocks", "")
    if published.isdigit() and 2 <= int(published) <= MAX_CACHE_BLOCKS:
        name = METRICS_SOURCES.get(metrics.kind or "", "cache_config_info")
        return ServerCapacity(
            int(published) - 1,
            f"num_gpu_blocks={published} ({name} in /metrics) less the null block it never fills",
        )
    if metrics is not None and metrics.kind in ("vllm", "pcache"):
        return None  # these publish it in /metrics or nowhere
    async for route, info in server_infos(client, options, secrets):
        tokens = _total_tokens(info)
        if tokens is not None and tokens >= block_size:
            blocks = min(tokens // block_size, MAX_CACHE_BLOCKS)
            return ServerCapacity(
                blocks, f"max_total_num_tokens={tokens} at {route} in {block_size}-token blocks"
            )
    return None


def _total_tokens(info: dict) -> int | None:
    """SGLang's `max_total_num_tokens`: at the top of its server info, or in its first
    scheduler's `internal_states` (newer releases)."""
    states = info.get("internal_states")
    places = [info, *(states[:1] if isinstance(states, list) else [])]
    for place in places:
        tokens = place.get("max_total_num_tokens") if isinstance(place, dict) else None
        if type(tokens) is int and tokens > 0:
            return tokens
    return None
