"""`pcache serve`: the built-in engine behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.defaults import DEFAULT_BLOCK_SIZE

MODEL_HELP = (
    "A preset (tiny, tiny-llama, tiny-qwen2, tiny-qwen3, qwen3-0.6b, llama3-1b, llama3-8b;"
    " seeded random weights) or a checkpoint directory (config.json + *.safetensors)."
)


def serve_command(
    model: Annotated[str, typer.Option("--model", "-m", help=MODEL_HELP)],
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (0.0.0.0 exposes it to the network).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="TCP port (0: any free port).")
    ] = 8000,
    served_model_name: Annotated[
        str | None,
        typer.Option("--served-model-name", help="The name clients send (default: --model)."),
    ] = None,
    engine: Annotated[str, typer.Option("--engine", help="cpu (torch) or gpu (Triton).")] = "cpu",
    block_size: Annotated[
        int, typer.Option("--block-size", min=1, help="Tokens per KV block (a power of two).")
    ] = DEFAULT_BLOCK_SIZE,
    kv_cache_tokens: Annotated[
        int | None,
        typer.Option("--kv-cache-tokens", min=1, help="KV cache size in tokens (CPU: 8192)."),
    ] = None,
    max_num_seqs: Annotated[
        int, typer.Option("--max-num-seqs", min=1, help="Most requests in the running batch.")
    ] = 256,
    max_num_batched_tokens: Annotated[
        int,
        typer.Option("--max-num-batched-tokens", min=1, help="Most tokens in one step."),
    ] = 8192,
    max_waiting: Annotated[
        int,
        typer.Option(
            "--max-waiting", min=1, help="Most queued requests; more get 429 (too many requests)."
        ),
    ] = 1024,
    no_prefix_cache: Annotated[
        bool, typer.Option("--no-prefix-cache", help="Disable automatic prefix caching.")
    ] = False,
    check_integrity: Annotated[
        bool,
        typer.Option(
            "--check-integrity", help="Check the block pool's invariants after every step (slow)."
        ),
    ] = False,
    kv_events: Annotated[
        str | None,
        typer.Option(
            "--kv-events",
            help="Publish vLLM's KV events (pcache[events]): a port (bound on loopback) or a ZMQ"
            " endpoint (tcp://*:5557 binds every interface; tcp://HOST:PORT connects there).",
        ),
    ] = None,
    kv_events_topic: Annotated[
        str, typer.Option("--kv-events-topic", help="The topic of each KV event message.")
    ] = "",
    engine_cpus: Annotated[
        str | None,
        typer.Option(
            "--engine-cpus",
            help="Run the engine's threads on these CPUs (a list such as 0, 0-3 or 0,2), as"
            " vLLM binds its own (VLLM_CPU_OMP_THREADS_BIND); default: anywhere.",
        ),
    ] = None,
    engine_thread: Annotated[
        bool,
        typer.Option(
            "--engine-thread",
            help="Run the engine in a thread of the server's process, not in its own process.",
        ),
    ] = False,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar=["PCACHE_API_KEY", "VLLM_API_KEY"],
            show_envvar=True,
            help="Every route but /health (and /metrics) needs Authorization: Bearer KEY.",
        ),
    ] = None,
    metrics_auth: Annotated[
        bool, typer.Option("--metrics-auth", help="/metrics needs the --api-key too.")
    ] = False,
    enable_admin_routes: Annotated[
        bool,
        typer.Option(
            "--enable-admin-routes",
            help="Without --api-key, answer /reset_prefix_cache and /flush_cache on a"
            " non-loopback --host too (on loopback they always answer).",
        ),
    ] = False,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn's: critical, error, warning, info, debug.")
    ] = "warning",
) -> None:
    """Serve a model over HTTP: /v1/chat/completions, /v1/completions, /tokenize, /metrics.

    Example: pcache serve --model tiny --port 8000
    """
    import uvicorn

    from pcache.cli.console import stderr
    from pcache.engine.config import torch_device
    from pcache.engine.cpus import parse_cpu_list
    from pcache.errors import EngineError, UsageError
    from pcache.serve.app import ServeOptions, build_server, create_app
    from pcache.serve.auth import is_loopback

    if block_size & (block_size - 1):
        raise UsageError(f"--block-size must be a power of two, got {block_size}")
    if log_level not in ("critical", "error", "warning", "info", "debug"):
        raise UsageError("--log-level must be critical, error, warning, info or debug")
    options = ServeOptions(
        model=model,
        served_model_name=served_model_name,
        device=torch_device(engine),
        block_size=block_size,
        kv_cache_tokens=kv_cache_tokens,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        max_waiting=max_waiting,
        enable_prefix_caching=not no_prefix_cache,
        check_integrity=check_integrity,
        kv_events=kv_events,
        kv_events_topic=kv_events_topic,
        engine_process=not engine_thread,
        engine_cpus=None if engine_cpus is None else parse_cpu_list(engine_cpus),
        api_key=api_key,
        metrics_auth=metrics_auth,
        admin_routes=enable_admin_routes or is_loopback(host),
    )
    if metrics_auth and api_key is None:
        raise UsageError("--metrics-auth needs --api-key")
    server = build_server(options)
    listener = bind(host, port)
    bound_port = listener.getsockname()[1]
    config = uvicorn.Config(
        create_app(server), log_level=log_level, timeout_graceful_shutdown=5, access_log=False
    )
    stderr.print(
        f"pcache: serving {server.model_name} ({server.facts.limits.num_blocks - 1} KV blocks"
        f" of {block_size} tokens, chat template: {server.codec.chat_template})"
        f" on http://{host}:{bound_port}/v1" + (f", KV events on {kv_events}" if kv_events else ""),
        markup=False,
    )
    for warning in exposure_warnings(host, api_key, kv_events):
        stderr.print(f"pcache: warning: {warning}", markup=False)
    runner = uvicorn.Server(config)
    failure = watch_engine(server, runner)
    runner.run(sockets=[listener])
    if failure:
        raise EngineError(f"the engine stopped ({failure[0]}); the server exited")


def bind(host: str, port: int):
    """A listening TCP socket (port 0: any free port); a port in use is a usage error."""
    import socket

    from pcache.errors import UsageError

    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((host, port))
    except OSError as error:
        raise UsageError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    listener.set_inheritable(True)
    return listener


ENGINE_FAILURE_GRACE_S = 1.0
"""How long a server whose engine stopped answers 503 (and /health 503) before it exits."""


def exposure_warnings(host: str, api_key: str | None, kv_events: str | None) -> list[str]:
    """What the server shows beyond this machine to anyone who can reach it."""
    from pcache.serve.auth import is_loopback
    from pcache.serve.kv_events import is_wildcard

    warnings = []
    if api_key is None and not is_loopback(host):
        warnings.append(
            f"--host {host} without --api-key: anyone who can reach the port can run"
            " completions and /tokenize (the admin routes stay off; --enable-admin-routes)"
        )
    if kv_events is not None and is_wildcard(kv_events):
        warnings.append(
            f"--kv-events {kv_events} binds every interface: BlockStored events carry the"
            " prompts' token ids to anyone who subscribes (a bare port binds loopback)"
        )
    return warnings


def watch_engine(server, runner) -> list[str]:
    """Stop uvicorn once the engine has stopped (killed, out of memory, a failed check),
    `ENGINE_FAILURE_GRACE_S` after the requests in flight were failed with a 503; the list
    gets the failure, for the exit code."""
    import threading
    import time

    failure: list[str] = []

    def watch() -> None:
        while not runner.should_exit:
            reason = server.engine_loop.failure
            if reason is not None:
                failure.append(reason)
                time.sleep(ENGINE_FAILURE_GRACE_S)
                runner.should_exit = True
                return
            time.sleep(0.1)

    threading.Thread(target=watch, name="pcache-engine-watch", daemon=True).start()
    return failure
