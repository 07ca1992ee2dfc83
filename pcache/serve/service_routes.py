"""The routes about the server itself: the model card, health, cache reset (vLLM's
`/reset_prefix_cache`, SGLang's `/flush_cache`) and Prometheus metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pcache.serve.api_error import ApiError
from pcache.serve.error_response import error_response
from pcache.serve.metrics import CONTENT_TYPE

if TYPE_CHECKING:
    from pcache.serve.app import Server


def service_routes(server: Server) -> list[Route]:
    """`GET /v1/models`, `GET /health`, `POST /reset_prefix_cache`, `/flush_cache` and
    `GET /metrics` of one server."""
    engine_loop = server.engine_loop

    async def models(request: Request) -> JSONResponse:
        card = {
            "id": server.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "pcache",
            "root": server.options.model,
            "max_model_len": server.facts.limits.max_model_len,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def health(request: Request) -> Response:
        if engine_loop.failure is not None:
            message = f"engine failure: {engine_loop.failure}"
            return error_response(ApiError(503, message, "service_unavailable"))
        if not engine_loop.healthy:
            return error_response(ApiError(503, "the engine is not running", "service_unavailable"))
        return Response(status_code=200)

    async def reset_prefix_cache(request: Request) -> Response:
        if not await engine_loop.reset_prefix_cache():
            message = "the prefix cache cannot be reset while requests hold blocks"
            return error_response(ApiError(409, message, "conflict"))
        return Response(status_code=200)

    async def flush_cache(request: Request) -> Response:
        """SGLang's `/flush_cache` (what sglang-router fans out): a plain-text answer, 400
        when requests still hold blocks, as SGLang refuses to flush while requests run."""
        if not await engine_loop.reset_prefix_cache():
            message = "Cache not flushed: requests are running or waiting.\n"
            return Response(message, status_code=400, media_type="text/plain")
        return Response("Cache flushed.\n", status_code=200, media_type="text/plain")

    async def metrics(request: Request) -> Response:
        return Response(server.metrics.render(), media_type=CONTENT_TYPE)

    return [
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/reset_prefix_cache", reset_prefix_cache, methods=["POST"]),
        Route("/flush_cache", flush_cache, methods=["GET", "POST"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
