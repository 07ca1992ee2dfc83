"""The requests `replay --endpoint` makes beside the replayed ones: headers with the API key
(never printed: errors are scrubbed of it), `/metrics` scrapes, prefix-cache resets, and the
model a server lists."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pcache.errors import UsageError
from pcache.replayer.endpoint_options import EndpointOptions
from pcache.replayer.server_metrics import MetricsSnapshot, parse_metrics

RESET_ROUTES = {"sglang": ("/flush_cache",), None: ("/reset_prefix_cache", "/flush_cache")}


def headers_for(options: EndpointOptions) -> tuple[dict[str, str], str | None]:
    """Request headers and the secret they carry (never printed: errors are scrubbed of it)."""
    variable = options.api_key_env or (
        "ANTHROPIC_API_KEY" if options.api == "anthropic" else "OPENAI_API_KEY"
    )
    secret = os.environ.get(variable) or None
    headers = {"content-type": "application/json"}
    if options.api == "anthropic":
        headers["anthropic-version"] = "2023-06-01"
        if secret:
            headers["x-api-key"] = secret
    elif secret:
        headers["authorization"] = f"Bearer {secret}"
    return headers, secret


async def scrape(
    client: Any, options: EndpointOptions
) -> tuple[MetricsSnapshot | None, str | None]:
    import httpx

    url = f"{options.root}/metrics"
    for attempt in range(options.retries + 1):  # a GET: safe to repeat
        try:
            response = await client.get(url, timeout=10)
        except httpx.HTTPError as error:
            if attempt == options.retries:
                return None, f"{url} unreachable ({type(error).__name__})"
            await asyncio.sleep(0.2 * (attempt + 1))
            continue
        if response.status_code != 200:
            return None, f"{url} answered HTTP {response.status_code}"
        try:
            return parse_metrics(response.text), None
        except ValueError as error:
            return None, f"{url} is not Prometheus text ({error})"
    return None, f"{url} unreachable"


async def reset_cache(client: Any, options: EndpointOptions, kind: str | None) -> str | None:
    """Reset the server's prefix cache; the route that worked, or None."""
    import httpx

    for route in RESET_ROUTES.get(kind, RESET_ROUTES[None]):
        try:
            response = await client.post(f"{options.root}{route}", timeout=30)
        except httpx.HTTPError:
            continue
        if response.status_code == 200:
            return route
    return None


def served_model(options: EndpointOptions) -> str:
    """The one model a server lists at /v1/models (when --model was not given)."""
    import httpx

    headers, secret = headers_for(options)
    try:
        response = httpx.get(f"{options.base}/models", headers=headers, timeout=10)
        names = [card["id"] for card in response.json()["data"]]
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
        message = f"{type(error).__name__}: {error}".replace(secret or "\0", "***")
        raise UsageError(
            f"--model not given and {options.base}/models did not list one ({message})"
        ) from None
    if len(names) != 1:
        raise UsageError(
            f"--model not given; {options.base}/models lists {len(names)}: {', '.join(names[:5])}"
        )
    return names[0]
