"""`pcache trace synth`: write a synthetic, seeded workload as JSONL."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.defaults import DEFAULT_BLOCK_SIZE

trace_app = typer.Typer(
    name="trace",
    help="Work with replay traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@trace_app.command("synth")
def synth_command(
    output: Annotated[
        str, typer.Option("--out", "-o", help="Output JSONL file, or - for stdout.")
    ] = "-",
    workload: Annotated[
        str, typer.Option("--workload", help="shared-prefix, chat or agent.")
    ] = "shared-prefix",
    num_requests: Annotated[int, typer.Option("--num-requests", "-n", help="Requests.")] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Random seed (same seed, same file).")] = 0,
    arrival: Annotated[str, typer.Option("--arrival", help="poisson or bursty.")] = "poisson",
    rate: Annotated[float, typer.Option("--rate", help="Mean arrivals per second.")] = 10.0,
    groups: Annotated[int, typer.Option("--groups", help="Shared-prefix groups.")] = 64,
    prompts_per_group: Annotated[
        int, typer.Option("--prompts-per-group", help="Distinct questions per group.")
    ] = 16,
    system_len: Annotated[int, typer.Option("--system-len", help="System prompt tokens.")] = 2048,
    question_len: Annotated[int, typer.Option("--question-len", help="Question tokens.")] = 128,
    output_len: Annotated[int, typer.Option("--output-len", help="Output tokens.")] = 256,
    zipf_alpha: Annotated[
        float | None, typer.Option("--zipf-alpha", help="Zipf group popularity (default: even).")
    ] = None,
    turns: Annotated[int, typer.Option("--turns", help="Turns per chat/agent session.")] = 8,
    turn_len: Annotated[int, typer.Option("--turn-len", help="Tokens per user/tool turn.")] = 128,
    window: Annotated[
        int, typer.Option("--window", help="Chat: keep only the last N turns (0: all).")
    ] = 0,
    tools_len: Annotated[
        int, typer.Option("--tools-len", help="Agent tool-definition tokens.")
    ] = 1024,
    output_format: Annotated[
        str, typer.Option("--output-format", help="requests, token-ids or hash-ids.")
    ] = "requests",
    block_size: Annotated[
        int, typer.Option("--block-size", "-b", help="Tokens per block (hash-ids).")
    ] = DEFAULT_BLOCK_SIZE,
) -> None:
    """Generate a synthetic workload.

    Example: pcache trace synth --workload chat -n 200 --seed 1 -o chat.jsonl
    """
    from pcache.files import check_writable
    from pcache.traces.synth import SynthOptions, iter_lines

    if output != "-":
        check_writable(output)

    options = SynthOptions(
        workload=workload,
        num_requests=num_requests,
        seed=seed,
        arrival=arrival,
        rate=rate,
        groups=groups,
        prompts_per_group=prompts_per_group,
        system_len=system_len,
        question_len=question_len,
        output_len=output_len,
        zipf_alpha=zipf_alpha,
        turns=turns,
        turn_len=turn_len,
        window=window,
        tools_len=tools_len,
        output=output_format,
        block_size=block_size,
    )
    _write_jsonl(output, iter_lines(options))


def _write_jsonl(path: str, lines) -> None:
    """JSON lines to stdout, or atomically to a file."""
    import sys

    import orjson

    from pcache.files import write_atomically

    if path == "-":
        for line in lines:
            sys.stdout.buffer.write(orjson.dumps(line) + b"\n")
        sys.stdout.flush()
        return
    write_atomically(path, (orjson.dumps(line) + b"\n" for line in lines))
