"""`pcache hash FILE`: token count and chained block hashes of each request."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.cli.options import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DATE,
    DEFAULT_HASH_ALGO,
    DEFAULT_TOKENIZER,
    BlockSizeOpt,
    CacheSaltOpt,
    DateOpt,
    FormatOpt,
    HashAlgoOpt,
    TokenizerOpt,
    check_text_or_json,
)


def hash_command(
    file: Annotated[str, typer.Argument(help="A request (.json), a JSONL file, or - for stdin.")],
    tokenizer: TokenizerOpt = DEFAULT_TOKENIZER,
    block_size: BlockSizeOpt = DEFAULT_BLOCK_SIZE,
    hash_algo: HashAlgoOpt = DEFAULT_HASH_ALGO,
    cache_salt: CacheSaltOpt = None,
    date: DateOpt = DEFAULT_DATE,
    format: FormatOpt = "text",
) -> None:
    """Print the token count and block hashes of a request.

    Example: pcache hash samples/a.json --hash-algo sha256_cbor --format json
    """
    from dataclasses import asdict

    import orjson
    from rich.markup import escape

    from pcache.cli.console import stdout, write_json
    from pcache.pipeline import Settings, hash_reports

    check_text_or_json(format)
    settings = Settings(tokenizer, block_size, hash_algo, cache_salt, date)
    for report in hash_reports(file, settings):
        if format == "json":
            write_json(orjson.dumps(asdict(report), option=orjson.OPT_SORT_KEYS))
            continue
        stdout.print(
            f"[bold]{escape(report.source)}[/]: {report.num_tokens} tokens,"
            f" {len(report.block_hashes)} full blocks of {block_size}"
            f" ({hash_algo}, {report.tokenizer})",
            soft_wrap=True,
        )
        for index, digest in enumerate(report.block_hashes):
            stdout.print(
                f"  block {index:>4}  tokens {index * block_size:>6}-"
                f"{(index + 1) * block_size - 1:<6}  {digest}",
                soft_wrap=True,
            )
