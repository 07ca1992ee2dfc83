"""The HTTP API of `pcache serve` (Starlette): OpenAI routes, health, metrics, cache reset."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pcache.defaults import DEFAULT_BLOCK_SIZE
from pcache.errors import EngineError
from pcache.serve.disconnect import EventStream, unless_disconnected
from pcache.serve.engine_loop import EngineLoop, Submission, TokenEvent
from pcache.serve.metrics import CONTENT_TYPE, ServerMetrics
from pcache.serve.protocol import ApiError, GenerationRequest, bad_request, parse_request
from pcache.serve.responses import ResponseBuilder, sse
from pcache.serve.text import TextCodec

MAX_BODY_BYTES = 32 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What `pcache serve` runs and how much it lets in."""

    model: str = "tiny"
    served_model_name: str | None = None
    device: str = "cpu"
    block_size: int = DEFAULT_BLOCK_SIZE
    kv_cache_tokens: int | None = None
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_waiting: int = 1024
    enable_prefix_caching: bool = True
    check_integrity: bool = False
    seed: int = 0


@dataclass(slots=True)
class Server:
    """The engine, its thread, its metrics and text codec: everything the routes use."""

    options: ServeOptions
    model_name: str
    engine: Any
    engine_loop: EngineLoop
    metrics: ServerMetrics
    codec: TextCodec


def build_server(options: ServeOptions) -> Server:
    """Load the model and size the KV cache (errors are EngineError, before any port opens)."""
    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    if options.max_waiting < 1:
        raise EngineError("--max-waiting must be at least 1")
    engine = Engine(
        EngineConfig(
            model=options.model,
            device=options.device,
            block_size=options.block_size,
            kv_cache_tokens=options.kv_cache_tokens,
            max_num_seqs=options.max_num_seqs,
            max_num_batched_tokens=options.max_num_batched_tokens,
            enable_prefix_caching=options.enable_prefix_caching,
            seed=options.seed,
        )
    )
    name = options.served_model_name or options.model
    holder: list[EngineLoop] = []
    metrics = ServerMetrics(
        name,
        num_running=lambda: holder[0].num_running,
        num_waiting=lambda: holder[0].num_waiting,
        kv_usage=lambda: engine.kv_manager.usage,
    )
    engine_loop = EngineLoop(engine, metrics, options.max_waiting, options.check_integrity)
    holder.append(engine_loop)
    codec = TextCodec(options.model, engine.model_config.vocab_size)
    return Server(options, name, engine, engine_loop, metrics, codec)


def _error(error: ApiError) -> JSONResponse:
    headers = {"retry-after": "1"} if error.status in (429, 503) else None
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def _json_body(request: Request) -> Any:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        raise ApiError(413, f"the request body exceeds {MAX_BODY_BYTES} bytes")
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise bad_request(f"the request body is not valid JSON: {error}") from None


def create_app(server: Server) -> Starlette:
    engine_loop = server.engine_loop

    def prompt_ids(params: GenerationRequest) -> list[int]:
        if params.chat:
            assert params.messages is not None
            try:
                token_ids = server.codec.render_chat(params.messages, params.tools)
            except Exception as error:  # a template that refuses the messages: their fault
                raise bad_request(f"cannot render the messages: {error}", "messages") from None
        elif isinstance(params.prompt, str):
            token_ids = server.codec.encode(params.prompt)
        else:
            assert params.prompt is not None
            token_ids = params.prompt
        try:
            server.engine.check_request(token_ids, params.max_tokens)
        except EngineError as error:
            raise bad_request(str(error), "messages" if params.chat else "prompt") from None
        return token_ids

    async def events(queue: asyncio.Queue, builder: ResponseBuilder):
        finished = False
        detokenizer = server.codec.detokenizer()
        try:
            while not finished:
                event = await queue.get()
                if isinstance(event, ApiError):
                    yield sse(event.body())
                    break
                assert isinstance(event, TokenEvent)
                finished = event.finish_reason is not None
                text = "" if event.token_id is None else detokenizer.push(event.token_id, finished)
                yield builder.chunk(text, event.finish_reason)
                if finished and builder.include_usage:
                    assert event.usage is not None
                    yield builder.usage_chunk(event.usage)
            yield sse("[DONE]")
        finally:
            if not finished:
                engine_loop.abort(builder.request_id)

    async def whole_answer(queue: asyncio.Queue, builder: ResponseBuilder) -> Response:
        detokenizer = server.codec.detokenizer()
        parts: list[str] = []
        while True:
            event = await queue.get()
            if isinstance(event, ApiError):
                return _error(event)
            if event.token_id is not None:
                parts.append(detokenizer.push(event.token_id))
            if event.finish_reason is not None:
                parts.append(detokenizer.flush())
                body = builder.whole("".join(parts), event.finish_reason, event.usage)
                return Response(orjson.dumps(body), media_type="application/json")

    async def generate(request: Request, chat: bool):
        try:
            params = parse_request(await _json_body(request), chat)
            if params.model is not None and params.model != server.model_name:
                raise ApiError(404, f"The model `{params.model}` does not exist.", "NotFoundError")
            token_ids = prompt_ids(params)
            request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            queue: asyncio.Queue = asyncio.Queue()
            submission = Submission(
                request_id,
                token_ids,
                params.max_tokens,
                params.temperature,
                params.ignore_eos,
                params.cache_salt,
            )
            engine_loop.submit(submission, queue)
        except ApiError as error:
            return _error(error)
        builder = ResponseBuilder(chat, server.model_name, request_id, params.include_usage)
        if params.stream:
            return EventStream(events(queue, builder))
        answered, response = await unless_disconnected(
            request.receive, whole_answer(queue, builder)
        )
        if not answered:
            engine_loop.abort(request_id)
            return Response(status_code=499)  # nobody reads it
        return response

    async def chat_completions(request: Request):
        return await generate(request, chat=True)

    async def completions(request: Request):
        return await generate(request, chat=False)

    async def models(request: Request) -> JSONResponse:
        card = {
            "id": server.model_name,
            "object": "model",
            "created": 0,
            "owned_by": "pcache",
            "root": server.options.model,
            "max_model_len": server.engine.runner.max_model_len,
        }
        return JSONResponse({"object": "list", "data": [card]})

    async def health(request: Request) -> Response:
        if engine_loop.failure is not None:
            return _error(ApiError(503, f"engine failure: {engine_loop.failure}", "internal_error"))
        return Response(status_code=200)

    async def reset_prefix_cache(request: Request) -> Response:
        if not await engine_loop.reset_prefix_cache():
            message = "the prefix cache cannot be reset while requests hold blocks"
            return _error(ApiError(409, message, "conflict"))
        return Response(status_code=200)

    async def metrics(request: Request) -> Response:
        return Response(server.metrics.render(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        engine_loop.start()
        try:
            yield
        finally:
            engine_loop.stop()

    return Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/reset_prefix_cache", reset_prefix_cache, methods=["POST"]),
            Route("/metrics", metrics, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
