"""`pcache generate`: run prompts through the built-in engine (greedy) and print the tokens."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.cli.options import FormatOpt, check_text_or_json, in_range


def generate_command(
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="A preset (tiny, tiny-llama, tiny-qwen2, tiny-qwen3, qwen3-0.6b, llama3-1b,"
            " llama3-8b; seeded random weights) or a checkpoint directory (config.json +"
            " *.safetensors).",
        ),
    ],
    prompt: Annotated[
        str | None, typer.Option("--prompt", "-p", help="Prompt text (model's tokenizer).")
    ] = None,
    prompt_ids: Annotated[
        str | None,
        typer.Option("--prompt-ids", help="A JSON file: a list of token-id lists (a batch)."),
    ] = None,
    max_new_tokens: Annotated[
        int,
        typer.Option("--max-new-tokens", "-n", callback=in_range(1), help="Tokens to generate."),
    ] = 16,
    engine: Annotated[str, typer.Option("--engine", help="cpu (torch) or gpu (Triton).")] = "cpu",
    no_prefix_cache: Annotated[
        bool, typer.Option("--no-prefix-cache", help="Disable automatic prefix caching.")
    ] = False,
    format: FormatOpt = "text",
) -> None:
    """Generate greedily with the built-in paged-attention engine.

    Example: pcache generate --model tiny --prompt-ids prompts.json --format json
    """
    from dataclasses import asdict

    import orjson
    from rich.markup import escape

    from pcache.cli.console import stdout, write_json
    from pcache.engine.generate import generate, load_prompt_ids
    from pcache.errors import UsageError
    from pcache.files import display_name

    check_text_or_json(format)
    if (prompt is None) == (prompt_ids is None):
        raise UsageError("give exactly one of --prompt and --prompt-ids")
    batch = load_prompt_ids(prompt_ids) if prompt_ids is not None else None
    result = generate(
        model,
        prompt,
        batch,
        max_new_tokens,
        engine,
        not no_prefix_cache,
        prompt_source=display_name(prompt_ids) if prompt_ids is not None else "--prompt",
    )
    if format == "json":
        write_json(orjson.dumps(asdict(result), option=orjson.OPT_SORT_KEYS))
        return
    cache = "on" if result.prefix_cache else "off"
    stdout.print(f"[bold]{escape(result.model)}[/] on {result.engine}, prefix cache {cache}")
    for index, output in enumerate(result.outputs):
        stdout.print(
            f"prompt {index}: {result.prompt_tokens[index]} tokens,"
            f" {result.cached_tokens[index]} cached, first token after"
            f" {result.ttft_ms[index]:.1f} ms"
        )
        stdout.print(f"  ids: {output}", markup=False)
        if result.texts is not None:
            stdout.print(f"  text: {result.texts[index]!r}", markup=False)
