"""`pcache watch LOG`: lint a growing log as it grows; serve /metrics and a live page."""

from __future__ import annotations

from typing import Annotated

import typer

from pcache.cli.options import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_DATE,
    BlockSizeOpt,
    ConfigOpt,
    DateOpt,
    ExtendSelectOpt,
    GroupByOpt,
    IgnoreOpt,
    LintTokenizerOpt,
    ProfileOpt,
    RedactOpt,
    SelectOpt,
)
from pcache.defaults import PROFILE_NAMES

DEFAULT_PORT = 9478
FORMATS = ("text", "json", "prometheus")


def watch_command(
    log: Annotated[
        str,
        typer.Argument(
            help="A JSONL log that grows (the recorder's, LiteLLM's, a gateway's), or a"
            " directory of rotating logs."
        ),
    ],
    once: Annotated[
        bool,
        typer.Option("--once", help="Lint what the log holds now, print it and exit (cron)."),
    ] = False,
    format: Annotated[
        str,
        typer.Option("--format", "-f", help="With --once: text, json or prometheus."),
    ] = "text",
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between two polls of the log.")
    ] = 2.0,
    host: Annotated[
        str, typer.Option("--host", help="Address to serve on (loopback unless told).")
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="Port of /metrics and the live page (0: any free one).")
    ] = DEFAULT_PORT,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="PCACHE_API_KEY",
            show_envvar=False,
            help="Every route but /health (and /metrics, unless --metrics-auth) needs"
            " Authorization: Bearer KEY (env PCACHE_API_KEY).",
        ),
    ] = None,
    metrics_auth: Annotated[
        bool, typer.Option("--metrics-auth", help="/metrics needs the --api-key too.")
    ] = False,
    window: Annotated[
        float | None,
        typer.Option(
            "--window",
            metavar="SECONDS",
            help="Forget prefixes and sessions unused for this long (default: the profile's"
            " longest cache lifetime; 3600 for profiles without one).",
        ),
    ] = None,
    select: SelectOpt = None,
    extend_select: ExtendSelectOpt = None,
    ignore: IgnoreOpt = None,
    profile: ProfileOpt = None,
    tokenizer: LintTokenizerOpt = None,
    block_size: BlockSizeOpt = DEFAULT_BLOCK_SIZE,
    date: DateOpt = DEFAULT_DATE,
    config: ConfigOpt = None,
    group_by: GroupByOpt = None,
    redact: RedactOpt = False,
    exit_zero: Annotated[
        bool, typer.Option("--exit-zero", help="With --once: exit 0 even with findings.")
    ] = False,
) -> None:
    """Lint a growing log as it grows: /metrics for Prometheus, a live page, --once for cron.

    Example: pcache watch logs/requests.jsonl --group-by model
    """
    from pcache.api import lint_options
    from pcache.errors import InputError, UsageError
    from pcache.text.redaction import redacting
    from pcache.watch.server import Access
    from pcache.watch.watcher import Watcher

    if format not in FORMATS:
        raise UsageError(f"--format must be one of {', '.join(FORMATS)}, got {format!r}")
    if not 0 < interval <= 3600:
        raise UsageError(f"--interval must be more than 0 and at most 3600 seconds, got {interval}")
    if window is not None and not 0 < window <= 10 * 365 * 86400:
        raise UsageError(f"--window must be more than 0 seconds, got {window}")
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be in [0, 65535], got {port}")
    if profile is not None and profile not in PROFILE_NAMES:
        raise UsageError(f"--profile must be one of {', '.join(PROFILE_NAMES)}, got {profile!r}")
    if metrics_auth and api_key is None:
        raise UsageError("--metrics-auth needs --api-key")
    if api_key is not None and not api_key.strip():
        raise UsageError("--api-key must not be empty")
    options, settings = lint_options(
        select=select,
        extend_select=extend_select,
        ignore=ignore,
        profile=profile,
        tokenizer=tokenizer,
        block_size=block_size,
        date=date,
        config=config,
        redact=redact,
        group_by=group_by,
        jobs=1,
        function="watch",
    )
    with redacting(redact):
        watcher = Watcher(log, options, settings, interval, window)
        if once:
            if not watcher.exists:
                raise InputError(log, "no such file or directory")
            watcher.catch_up()
            _print(watcher.status, format)
            if watcher.status.totals.failing and not exit_zero:
                raise typer.Exit(1)
            return
        _serve(watcher, host, port, interval, Access(api_key, metrics_auth))


def _serve(watcher, host: str, port: int, interval: float, access) -> None:
    """Poll until SIGTERM or SIGINT, serving the latest status."""
    import math
    import signal
    import threading

    from pcache.cli.console import stderr, warning
    from pcache.serve.auth import is_loopback
    from pcache.watch.server import StatusServer

    refresh = max(2, math.ceil(interval))
    server = StatusServer(host, port, lambda: watcher.status, refresh, access)
    stop = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stop.set())
    if not is_loopback(host) and access.api_key is None:
        warning(
            f"--host {host} without --api-key: anyone who can reach the port reads the findings"
            " (their messages quote the requests; --redact shows them as shapes)"
        )
    server.start()
    shown = f"[{host}]" if ":" in host else host
    stderr.print(
        f"pcache watch: http://{shown}:{server.port}/ (/metrics, /status.json), polling"
        f" {watcher.log} every {interval:g} s",
        markup=False,
        highlight=False,
    )
    waited = False
    try:
        while not stop.is_set():
            poll = watcher.step()
            if watcher.status.waiting and not waited:
                stderr.print(f"pcache watch: waiting for {watcher.log}", markup=False)
                waited = True
            if not poll.more:
                stop.wait(interval)
    finally:
        server.close()


def _print(status, format: str) -> None:
    from pcache.cli.console import write_json

    if format == "json":
        import orjson

        write_json(orjson.dumps(status.as_dict(), option=orjson.OPT_INDENT_2))
        return
    if format == "prometheus":
        from pcache.watch import exposition

        typer.echo(exposition.render(status), nl=False)
        return
    for line in summary_lines(status):
        typer.echo(line)


def summary_lines(status) -> list[str]:
    """The status as a few lines of text."""
    totals = status.totals
    lines = [
        f"{status.log}: {totals.requests:,} requests, {totals.sessions:,} sessions,"
        f" {totals.prompt_tokens:,} prompt tokens ({totals.profile}, {totals.tokenizer},"
        f" block size {totals.block_size})",
        f"cacheable: {100 * totals.cacheable_ratio:.1f}% as is,"
        f" {100 * totals.cacheable_ratio_if_fixed:.1f}% if fixed;"
        f" {totals.reprefilled_tokens:,} tokens re-prefilled",
    ]
    rules = sorted(totals.rules, key=lambda t: (-t.tokens_reprefilled, -t.count, t.code))
    if rules:
        lines.append("re-prefilled tokens a fix saves, by rule:")
        width = max(len(f"{t.code} {t.name}") for t in rules)
        for total in rules:
            label = f"{total.code} {total.name}".ljust(width)
            lines.append(
                f"  {label}  {total.count:>6,} {'finding' if total.count == 1 else 'findings':<8}"
                f"  {total.tokens_reprefilled:>10,} tokens"
            )
    lines.append(f"  no finding: {totals.unattributed_tokens:,} tokens")
    if totals.group_by:
        lines.append(f"by {', '.join(totals.group_by)}:")
        for group in totals.groups[:20]:
            share = group.reusable_tokens / group.prompt_tokens if group.prompt_tokens else 0.0
            lines.append(
                f"  {group.name}: {group.requests:,} requests, {group.prompt_tokens:,} tokens,"
                f" {100 * share:.1f}% cacheable, {group.reprefilled_tokens:,} re-prefilled"
            )
    if totals.observed_requests:
        lines.append(
            f"observed cached tokens: {totals.observed_cached_tokens:,}, predicted"
            f" {totals.predicted_cached_tokens:,} ({totals.observed_requests:,} requests report"
            f" them, {totals.observed_disagreeing:,} disagree)"
        )
    if totals.unreadable:
        lines.append(f"lines skipped: {totals.unreadable:,} (not read or not rendered)")
    return lines
