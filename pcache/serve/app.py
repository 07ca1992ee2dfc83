"""The HTTP API of `pcache serve` (Starlette): OpenAI routes, vLLM's auxiliary routes
(`/tokenize`, `/detokenize`, `/version`), health, metrics, cache reset (vLLM's
`/reset_prefix_cache`, SGLang's `/flush_cache`).

Every error, whoever raises it (a route, Starlette's routing, an unexpected exception), is
answered in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request

from pcache.defaults import DEFAULT_BLOCK_SIZE
from pcache.errors import EngineError, UsageError
from pcache.serve.api_error import ApiError
from pcache.serve.auth import AccessControl
from pcache.serve.auxiliary import auxiliary_routes
from pcache.serve.body import BODY_TIMEOUT_S, MAX_BODY_BYTES, read_json
from pcache.serve.engine_loop import EngineFacts, EngineLoop
from pcache.serve.error_response import EXCEPTION_HANDLERS
from pcache.serve.generation import GenerationRoutes
from pcache.serve.metrics import ServerMetrics
from pcache.serve.service_routes import service_routes
from pcache.serve.text import TextCodec

if TYPE_CHECKING:
    from pcache.serve.engine_process import EngineProcess


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
    api_key: str | None = None
    """The Bearer key every route but /health needs (`pcache.serve.auth`); None: no key."""
    metrics_auth: bool = False
    """/metrics needs the key too."""
    admin_routes: bool = True
    """Without a key, /reset_prefix_cache and /flush_cache answer (else 403)."""


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
    if options.kv_cache_tokens is not None and options.kv_cache_tokens < options.block_size:
        raise UsageError(
            f"--kv-cache-tokens must be at least --block-size ({options.block_size}),"
            f" got {options.kv_cache_tokens}"
        )
    if options.api_key is not None and not options.api_key.strip():
        raise UsageError("--api-key must not be empty")
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


def create_app(server: Server) -> Starlette:
    """The Starlette app of one server: its routes, its error handlers, its access control
    (`pcache.serve.auth`), and a lifespan that starts the engine's host and stops it."""
    engine_loop = server.engine_loop
    options = server.options

    async def body_of(request: Request):
        return await read_json(request, options.max_body_bytes, options.body_timeout_s)

    def check_model(model: str | None) -> None:
        if model is not None and model != server.model_name:
            raise ApiError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        engine_loop.start()
        try:
            yield
        finally:
            engine_loop.stop()

    return Starlette(
        routes=[
            *GenerationRoutes(server, body_of, check_model).routes(),
            *service_routes(server),
            *auxiliary_routes(server, body_of, check_model),
        ],
        middleware=[
            Middleware(
                AccessControl,
                api_key=options.api_key,
                metrics_auth=options.metrics_auth,
                admin_routes=options.admin_routes,
            )
        ],
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
