"""Option declarations shared by several commands."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.defaults import (  # a leaf module: `pcache --help` stays light
    DEFAULT_BLOCK_SIZE,
    DEFAULT_CHARS_PER_TOKEN,
    DEFAULT_DATE,
    DEFAULT_EXECUTOR,
    DEFAULT_HASH_ALGO,
    DEFAULT_MODEL,
    DEFAULT_ROUTER,
    DEFAULT_TOKENIZER,
    MAX_BLOCK_SIZE,
    MAX_JOBS,
    PROFILE_NAMES,
)

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_CHARS_PER_TOKEN",
    "DEFAULT_DATE",
    "DEFAULT_EXECUTOR",
    "DEFAULT_HASH_ALGO",
    "DEFAULT_MODEL",
    "DEFAULT_ROUTER",
    "DEFAULT_TOKENIZER",
]


def in_range(
    minimum: float | None = None, maximum: float | None = None, above: float | None = None
):
    """A typer callback checking an option with `pcache.options.numbers.check_number` (None
    passes)."""

    def check(context, parameter, value):
        if value is None:
            return value
        from pcache.options.numbers import check_number

        name = max(parameter.opts, key=len) if parameter.opts else parameter.name
        return check_number(name, value, minimum=minimum, maximum=maximum, above=above)

    return check


TokenizerOpt = Annotated[
    str,
    typer.Option(
        "--tokenizer",
        "-t",
        help="gpt-oss (embedded, default), o200k_base, cl100k_base, o200k_harmony, a model preset"
        " (tiny, qwen3-0.6b, ...: as pcache serve --model NAME tokenizes), or a Hugging Face"
        " model directory or hub id (tokenizer.json + chat template).",
    ),
]
LintTokenizerOpt = Annotated[
    str | None,
    typer.Option(
        "--tokenizer",
        "-t",
        help="gpt-oss (default), o200k_base, cl100k_base, a model preset (tiny, qwen3-0.6b: as"
        " pcache serve --model NAME tokenizes), or a Hugging Face model directory.",
    ),
]
"""`lint` and `report`'s `--tokenizer` (lint's None: the configured one, else the default)."""
BlockSizeOpt = Annotated[
    int,
    typer.Option(
        "--block-size", "-b", callback=in_range(1, MAX_BLOCK_SIZE), help="Tokens per KV block."
    ),
]
ReplayBlockSizeOpt = Annotated[
    int | None,
    typer.Option(
        "--block-size",
        "-b",
        callback=in_range(1, MAX_BLOCK_SIZE),
        help=f"Tokens per KV block (default {DEFAULT_BLOCK_SIZE}; with --endpoint, the size the"
        " server publishes, when it does).",
    ),
]
HashAlgoOpt = Annotated[
    str,
    typer.Option(
        "--hash-algo",
        help="pcache (namespaced, default), or vLLM's sha256, sha256_cbor, xxhash, xxhash_cbor.",
    ),
]
CacheSaltOpt = Annotated[
    str | None, typer.Option("--cache-salt", help="Per-tenant salt mixed into the first block.")
]
DateOpt = Annotated[
    str,
    typer.Option(
        "--date",
        help="Date (YYYY-MM-DD) written by templates that print one; fixed for reproducibility.",
    ),
]
ColumnOpt = Annotated[
    str | None,
    typer.Option(
        "--column",
        metavar="NAME",
        help="The column of Parquet/CSV inputs that holds the request bodies (default: the first"
        " JSON-looking one; FILE#COLUMN names it per file).",
    ),
]
SelectOpt = Annotated[
    list[str] | None,
    typer.Option("--select", help="Rule codes or prefixes to enable (replaces config)."),
]
ExtendSelectOpt = Annotated[
    list[str] | None, typer.Option("--extend-select", help="Add rule codes or prefixes.")
]
IgnoreOpt = Annotated[
    list[str] | None, typer.Option("--ignore", help="Rule codes or prefixes to disable.")
]
ProfileOpt = Annotated[
    str | None,
    typer.Option("--profile", help=f"Cache that prices findings: {', '.join(PROFILE_NAMES)}."),
]
ConfigOpt = Annotated[
    str | None, typer.Option("--config", help="pyproject.toml to read [tool.pcache.lint] from.")
]
GroupByOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--group-by",
        metavar="KEY",
        help="Also total by model, user, file, app ([tool.pcache.apps]), metadata.NAME or"
        " header.NAME (repeat to combine).",
    ),
]
PriceOpt = Annotated[
    str | None,
    typer.Option(
        "--price",
        metavar="MODEL",
        help="Price every request as MODEL (a family of pcache's price table or of"
        " [tool.pcache.prices]); default: each request's own model.",
    ),
]
RedactOpt = Annotated[
    bool,
    typer.Option(
        "--redact",
        help="Quote no string of a request: values shown as their shapes (<clock>, <uuid>,"
        " <email #d>, <text 42 chars #d>: digests keyed by PCACHE_REDACT_KEY, else per run).",
    ),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="Output format: text or json.")]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        min=1,
        max=MAX_JOBS,
        help="Threads that tokenize the requests' text (default: one per core); the results"
        " do not depend on it.",
    ),
]
ExecutorOpt = Annotated[
    str,
    typer.Option(
        "--executor",
        help="Where requests are rendered, tokenized and hashed: local (this process, --jobs"
        " threads) or ray (Ray tasks over shards of the input; pcache[ray]). Same results.",
    ),
]
RayAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        metavar="ADDR",
        help="--executor ray: the cluster to join (auto: the one running here; default: that"
        " one, else a local cluster for this run).",
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose", help="Say on stderr how text is tokenized (tiktoken or tokenizers, and why)."
    ),
]


def say_encoder(tokenizer: str | None) -> None:
    """`--verbose`: one line on stderr naming the tokenizer and the library that encodes."""
    from pcache.cli.console import stderr
    from pcache.prompt.renderers.render import encoder_path, resolve_renderer

    renderer = resolve_renderer(tokenizer)
    stderr.print(f"pcache: tokenizer {renderer.name}: encoded by {encoder_path(renderer)}")


def check_text_or_json(format: str) -> None:
    """The check behind every `FormatOpt`."""
    if format not in ("text", "json"):
        from pcache.errors import UsageError

        raise UsageError(f"--format must be text or json, got {format!r}")


ReplicasOpt = Annotated[
    str | None,
    typer.Option(
        "--replicas",
        help="Replicas behind a router, each with its own --cache-blocks pool; a list"
        " (1,2,4,8) sweeps.",
    ),
]
RouterOpt = Annotated[
    str,
    typer.Option(
        "--router",
        help="With --replicas: round-robin, random, least-load, session, prefix-hash,"
        " sglang, llm-d, ray, dynamo or precise; a list compares them.",
    ),
]
RouterParamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--router-param",
        help="ROUTER.NAME=VALUE, e.g. sglang.cache_threshold=0.5 (repeatable; docs/fleet.md).",
    ),
]
CharsPerTokenOpt = Annotated[
    int,
    typer.Option(
        "--chars-per-token",
        help="With --replicas on hash-id traces: characters per token of the routers' text view.",
    ),
]
