"""The HTTP API of `pcache serve` (Starlette): OpenAI routes, vLLM's auxiliary routes
(`/tokenize`, `/detokenize`, `/version`), health, metrics, cache reset (vLLM's
`/reset_prefix_cache`, SGLang's `/flush_cache`).

Every error, whoever raises it (a route, Starlette's routing, an unexpected exception), is
answered in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pcache.defaults import DEFAULT_BLOCK_SIZE
from pcache.errors import EngineError
from pcache.serve.answer import Answer
from pcache.serve.api_error import ApiError, bad_request, error_for_status, internal_error
from pcache.serve.auxiliary import auxiliary_routes
from pcache.serve.body import BODY_TIMEOUT_S, MAX_BODY_BYTES, read_json
from pcache.serve.disconnect import EventStream, unless_disconnected
from pcache.serve.engine_loop import EngineFacts, EngineLoop, Submission
from pcache.serve.logprobs import LogprobsWriter
from pcache.serve.metrics import CONTENT_TYPE, ServerMetrics
from pcache.serve.protocol import GenerationRequest, parse_request, unknown_fields
from pcache.serve.responses import ResponseBuilder, sse
from pcache.serve.text import TextCodec

if TYPE_CHECKING:
    from pcache.serve.engine_process import EngineProcess

logger = logging.getLogger("pcache.serve")


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
    max_body_bytes: int = MAX_BODY_BYTES
    body_timeout_s: float = BODY_TIMEOUT_S
    kv_events: str | None = None  # a ZMQ endpoint to publish vLLM's KV events on
    kv_events_topic: str = ""
    engine_process: bool = False
    """Run the engine in a process of its own (`pcache serve`'s default), not in a thread."""
    engine_cpus: tuple[int, ...] | None = None
    """The CPUs the engine's threads run on (`pcache.engine.cpus`); None: anywhere."""


@dataclass(slots=True)
class Server:
    """The engine's host (its thread, or its process), what it told of the engine, the
    metrics and the text codec: everything the routes use."""

    options: ServeOptions
    model_name: str
    engine: Any
    """The `Engine` when it runs in a thread of this process, else None."""
    engine_loop: EngineLoop | EngineProcess
    metrics: ServerMetrics
    codec: TextCodec

    @property
    def facts(self) -> EngineFacts:
        return self.engine_loop.facts


def build_server(options: ServeOptions) -> Server:
    """Load the model and size the KV cache (errors are EngineError, before any port opens)."""
    from pcache.engine.config import EngineConfig

    if options.max_waiting < 1:
        raise EngineError("--max-waiting must be at least 1")
    config = EngineConfig(
        model=options.model,
        device=options.device,
        block_size=options.block_size,
        kv_cache_tokens=options.kv_cache_tokens,
        max_num_seqs=options.max_num_seqs,
        max_num_batched_tokens=options.max_num_batched_tokens,
        enable_prefix_caching=options.enable_prefix_caching,
        seed=options.seed,
    )
    engine = None
    host: EngineLoop | EngineProcess
    if options.kv_events is not None:
        from pcache.serve.kv_events import check_endpoint

        check_endpoint(options.kv_events)
    if options.engine_cpus is not None:
        from pcache.engine.cpus import check_cpus

        check_cpus(options.engine_cpus)
    if options.engine_process:
        from pcache.engine.model_config import resolve_model_config
        from pcache.serve.engine_process import EngineProcess

        vocab_size = resolve_model_config(options.model)[0].vocab_size  # a bad model: at once
        starting = EngineProcess.launch(
            config,
            options.check_integrity,
            options.kv_events,
            options.kv_events_topic,
            options.engine_cpus,
        )
        try:
            codec = TextCodec(options.model, vocab_size)  # while the child loads the weights
        except BaseException:
            starting.close()
            raise
        host = starting.ready()
    else:
        from pcache.engine.engine import Engine

        engine = Engine(config)
        publisher = None
        if options.kv_events is not None:
            from pcache.serve.kv_events import KVEventPublisher

            publisher = KVEventPublisher(options.kv_events, options.kv_events_topic)
            publisher.open()
        host = EngineLoop(engine, options.check_integrity, publisher, options.engine_cpus)
        codec = TextCodec(options.model, engine.model_config.vocab_size)
    facts = host.facts
    name = options.served_model_name or options.model
    metrics = ServerMetrics(
        name,
        num_running=lambda: host.num_running,
        num_waiting=lambda: host.num_waiting,
        kv_usage=lambda: host.kv_usage,
        cache_config={
            "block_size": str(options.block_size),
            "cache_dtype": facts.dtype_name,
            "enable_prefix_caching": str(options.enable_prefix_caching),
            "num_gpu_blocks": str(facts.limits.num_blocks),
            "prefix_caching_hash_algo": facts.hash_algo,
        },
    )
    host.bind(metrics, options.max_waiting)
    return Server(options, name, engine, host, metrics, codec)


def error_response(error: ApiError, headers: dict[str, str] | None = None) -> JSONResponse:
    if error.status in (429, 503):
        headers = {**(headers or {}), "retry-after": "1"}
    return JSONResponse(error.body(), status_code=error.status, headers=headers)


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    message = error.detail
    if error.status_code == 404:
        message = f"no route {request.url.path}"
    elif error.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    return error_response(error_for_status(error.status_code, str(message)), error.headers)


async def _unexpected_error(request: Request, error: Exception) -> Response:
    return error_response(internal_error(error))


_warned_fields: set[str] = set()


def _warn_unknown(body: dict, chat: bool) -> None:
    """vLLM's behaviour: unknown fields are ignored, with a warning (once per name)."""
    for key in unknown_fields(body, chat):
        if key not in _warned_fields and len(_warned_fields) < 256:
            _warned_fields.add(key)
            logger.warning("pcache serve: ignoring the unknown request field %r", key[:80])


def create_app(server: Server) -> Starlette:
    engine_loop = server.engine_loop
    options = server.options

    async def body_of(request: Request):
        return await read_json(request, options.max_body_bytes, options.body_timeout_s)

    def prompt_ids(params: GenerationRequest) -> list[int]:
        if params.chat:
            assert params.messages is not None
            try:
                token_ids = server.codec.render_chat(params.messages, params.tools)
            except Exception as error:  # a template that refuses the messages: their fault
                raise bad_request(f"cannot render the messages: {error}", "messages") from None
        elif isinstance(params.prompt, str):
            if params.add_special_tokens:
                token_ids = server.codec.encode(params.prompt)
            else:
                token_ids = server.codec.encode(params.prompt, add_special_tokens=False)
        else:
            assert params.prompt is not None
            token_ids = params.prompt
        try:
            server.facts.limits.check(token_ids, params.max_tokens)
        except EngineError as error:
            param = "messages" if params.chat else "prompt"
            if "exceeds" in str(error) and len(token_ids) < server.facts.limits.max_model_len:
                param = params.max_tokens_param
            raise bad_request(str(error), param) from None
        return token_ids

    def logprobs_writer(params: GenerationRequest) -> LogprobsWriter | None:
        return None if params.logprobs is None else LogprobsWriter(server.codec, params.chat)

    async def events(queue: asyncio.Queue, builder: ResponseBuilder, params, echo: str | None):
        finished = False
        answer = Answer(server.codec, params)
        writer = logprobs_writer(params)
        try:
            if echo:
                yield builder.chunk(echo, None)
            while not finished:
                event = await queue.get()
                if isinstance(event, ApiError):
                    finished = True  # the engine is done with it
                    yield sse(event.body())
                    break
                piece = answer.push(event)
                finished = piece.finish_reason is not None
                if answer.ended_here:
                    engine_loop.abort(builder.request_id, "stop")
                logprobs = writer.write(piece.logprobs) if writer and piece.logprobs else None
                yield builder.chunk(piece.text, piece.finish_reason, logprobs, piece.stop_reason)
                if finished and builder.include_usage:
                    assert piece.usage is not None
                    yield builder.usage_chunk(piece.usage)
        except Exception as error:  # a fault while answering: the stream says so and ends
            logger.exception("pcache serve: a streamed answer failed")
            yield sse(internal_error(error).body())
        finally:
            if not finished:
                engine_loop.abort(builder.request_id)
        yield sse("[DONE]")

    async def whole_answer(queue: asyncio.Queue, builder: ResponseBuilder, params, echo: str):
        answer = Answer(server.codec, params)
        writer = logprobs_writer(params)
        parts: list[str] = [echo]
        entries: list = []
        while True:
            event = await queue.get()
            if isinstance(event, ApiError):
                return error_response(event)
            piece = answer.push(event)
            parts.append(piece.text)
            entries.extend(piece.logprobs)
            if piece.finish_reason is None:
                continue
            if answer.ended_here:
                engine_loop.abort(builder.request_id, "stop")
            logprobs = writer.write(entries) if writer else None
            assert piece.usage is not None
            body = builder.whole(
                "".join(parts), piece.finish_reason, piece.usage, logprobs, piece.stop_reason
            )
            return Response(orjson.dumps(body), media_type="application/json")

    def check_model(model: str | None) -> None:
        if model is not None and model != server.model_name:
            raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")

    async def generate(request: Request, chat: bool):
        try:
            body = await body_of(request)
            params = parse_request(body, chat)
            _warn_unknown(body, chat)
            check_model(params.model)
            token_ids = prompt_ids(params)
            echo = ""
            if params.echo:
                prompt = params.prompt
                echo = prompt if isinstance(prompt, str) else server.codec.decode(token_ids)
            request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            queue: asyncio.Queue = asyncio.Queue()
            submission = Submission(
                request_id,
                token_ids,
                params.max_tokens,
                params.temperature,
                params.ignore_eos,
                params.cache_salt,
                params.logprobs,
            )
            engine_loop.submit(submission, queue)
        except ApiError as error:
            return error_response(error)
        except ClientDisconnect:
            return Response(status_code=499)  # the client left while sending the body
        builder = ResponseBuilder(chat, server.model_name, request_id, params.include_usage)
        if params.stream:
            return EventStream(events(queue, builder, params, echo))
        try:
            answered, response = await unless_disconnected(
                request.receive, whole_answer(queue, builder, params, echo)
            )
        except Exception as error:  # a fault while answering: this request fails alone
            engine_loop.abort(request_id)
            logger.exception("pcache serve: an answer failed")
            grouped = getattr(error, "exceptions", None)  # a task group's ExceptionGroup
            if isinstance(grouped, tuple) and len(grouped) == 1:
                error = grouped[0]
            return error_response(internal_error(error))
        except BaseException:
            engine_loop.abort(request_id)  # nobody will read what it generates
            raise
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
            Route("/flush_cache", flush_cache, methods=["GET", "POST"]),
            Route("/metrics", metrics, methods=["GET"]),
            *auxiliary_routes(server, body_of, check_model),
        ],
        exception_handlers={HTTPException: _http_error, Exception: _unexpected_error},
        lifespan=lifespan,
    )
