"""`pcache diff A B`: where two requests stop sharing a cached prefix, and why.

Exit codes follow GNU diff: 0 identical rendered tokens, 1 divergent, 2 trouble.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from pcache.cli.options import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DATE,
    DEFAULT_HASH_ALGO,
    DEFAULT_TOKENIZER,
    BlockSizeOpt,
    CacheSaltOpt,
    ColumnOpt,
    DateOpt,
    FormatOpt,
    HashAlgoOpt,
    JobsOpt,
    RedactOpt,
    TokenizerOpt,
    check_text_or_json,
)

if TYPE_CHECKING:
    from pcache.divergence.compare import DiffResult
    from pcache.pipeline import HashedPrompt


def diff_command(
    a: Annotated[str, typer.Argument(help="The earlier request (.json), or - for stdin.")],
    b: Annotated[str, typer.Argument(help="The later request (.json), or - for stdin.")],
    tokenizer: TokenizerOpt = DEFAULT_TOKENIZER,
    block_size: BlockSizeOpt = DEFAULT_BLOCK_SIZE,
    hash_algo: HashAlgoOpt = DEFAULT_HASH_ALGO,
    cache_salt: CacheSaltOpt = None,
    date: DateOpt = DEFAULT_DATE,
    format: FormatOpt = "text",
    column: ColumnOpt = None,
    jobs: JobsOpt = None,
    redact: RedactOpt = False,
) -> None:
    """Show where B stops reusing A's cached prefix, what each cache reuses, and why.

    Example: pcache diff samples/a.json samples/b.json
    """
    from pcache.cli.console import stdout, write_json
    from pcache.comparison import compare
    from pcache.errors import UsageError
    from pcache.pipeline import Settings
    from pcache.prompt.reading.tables import with_columns
    from pcache.text.redaction import redacting

    check_text_or_json(format)
    a, b = with_columns([a, b], column)
    if a == "-" and b == "-":
        raise UsageError("only one of A and B can be read from stdin")
    settings = Settings(tokenizer, block_size, hash_algo, cache_salt, date, jobs=jobs)
    comparison = compare(a, b, settings, redact=redact)
    result = comparison.result
    if format == "json":
        write_json(result.to_json())
    else:
        with redacting(redact):
            stdout.print(render_report(result, comparison.a, comparison.b))
    raise typer.Exit(0 if result.identical else 1)


def _visible(text: str) -> str:
    return text.replace("\r", "␍").replace("\n", "⏎").replace("\t", "⇥")


def render_report(result: DiffResult, a: HashedPrompt, b: HashedPrompt):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    size = result.block_size
    lines: list = []
    header = Text()
    header.append("A ", style="bold cyan").append(f"{result.a}  ")
    header.append(f"{result.num_tokens[0]:,} tokens, {result.num_blocks[0]:,} full blocks\n")
    header.append("B ", style="bold magenta").append(f"{result.b}  ")
    header.append(f"{result.num_tokens[1]:,} tokens, {result.num_blocks[1]:,} full blocks\n")
    header.append(
        f"tokenizer {result.tokenizer} · block size {size} · hash {result.hash_algo}",
        style="dim",
    )
    lines.append(header)
    cause = result.cause
    if result.identical:
        verdict = Text("\nIdentical rendered tokens", style="bold green")
        if cause and cause.kind == "cache_salt":
            verdict.append(" (but different cache salts: no shared blocks)", style="yellow")
        lines.append(verdict)
    else:
        token = result.first_divergence_token
        assert token is not None
        block = result.first_divergent_block
        verdict = Text("\nFirst divergence at token ", style="bold")
        verdict.append(f"{token:,}", style="bold red")
        verdict.append(f" (block {block}, offset {token % size} in block); ")
        verdict.append(
            f"{result.common_blocks} full blocks ({result.common_blocks * size:,} tokens) hash"
            " the same"
        )
        lines.append(verdict)
        if cause is not None and result.first_divergence_char is not None:
            lines.append(_excerpts(a, b, result.first_divergence_char, cause))
        if result.a_tokens or result.b_tokens:  # none under --redact
            lines.append(_token_window(result))
    if cause is not None:
        why = Text("\nCause: ", style="bold")
        why.append(cause.kind.replace("_", " "), style="bold yellow")
        why.append(f" — {cause.summary}")
        if cause.detail:
            why.append(f" ({cause.detail})", style="dim")
        if cause.rule is not None:
            why.append("\nBreaks: ", style="bold")
            why.append(f"{cause.rule['code']} {cause.rule['name']}", style="bold red")
            why.append(f" (pcache lint --explain {cause.rule['code']})", style="dim")
        why.append("\nFix: ", style="bold")
        why.append(cause.hint)
        lines.append(why)
    table = Table(title="Tokens of B reused after A was cached", title_justify="left")
    table.add_column("cache")
    table.add_column("reused", justify="right")
    table.add_column("of B", justify="right")
    table.add_column("share", justify="right")
    table.add_column("assumes")
    for name, tokens in result.reusable_tokens.items():
        total = result.num_tokens[1]
        share = f"{tokens / total:.1%}" if total else "-"
        table.add_row(name, f"{tokens:,}", f"{total:,}", share, result.reuse_assumes.get(name, ""))
    lines.append(Text())
    lines.append(table)
    return Group(*lines)


def _excerpts(a: HashedPrompt, b: HashedPrompt, char: int, cause):
    """The text of A and B around the first difference (under `--redact`, its shapes)."""
    from rich.text import Text

    from pcache.text.redaction import active

    if active() is not None:
        out = Text()
        for label, path, excerpt in (
            ("A", cause.a_path, cause.a_excerpt),
            ("B", cause.b_path, cause.b_excerpt),
        ):
            out.append(f"\n  {label} ", style="bold")
            out.append(f"{path or '(template text)'}\n", style="dim")
            out.append("    " + excerpt)
        return out

    out = Text()
    for label, style, hashed, path in (
        ("A", "cyan", a, cause.a_path),
        ("B", "magenta", b, cause.b_path),
    ):
        text = hashed.rendered.text
        start = max(0, char - 40)
        out.append(f"\n  {label} ", style=f"bold {style}")
        out.append(f"{path or '(template text)'}\n", style="dim")
        before = ("…" if start else "") + _visible(text[start:char])
        out.append("    " + before)
        out.append(_visible(text[char : char + 40]) or "(end)", style="bold red")
        out.append("…" if char + 40 < len(text) else "")
        if label == "B":
            out.append("\n    " + " " * len(before) + "^", style="bold red")
    return out


def _token_window(result: DiffResult):
    from rich.text import Text

    size = result.block_size
    token = result.first_divergence_token
    out = Text("\n  tokens by block (│ = block boundary, red = first difference):")
    for label, tokens in (("A", result.a_tokens), ("B", result.b_tokens)):
        out.append(f"\n  {label} ")
        for offset, value in enumerate(tokens):
            position = result.window_start + offset
            if position % size == 0:
                out.append("│ ", style="dim")
            style = "bold red" if token is not None and position >= token else ""
            out.append(f"{value} ", style=style)
    return out
