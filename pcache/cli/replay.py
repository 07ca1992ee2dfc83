"""`pcache replay TRACE`: simulate a prefix cache (`--simulate`, default), measure it
through the built-in engine (`--engine cpu|gpu`, `--gpu`), cache on against cache off, or
against a live server (`--endpoint URL`).

The command's parameters are the drivers' declared options (`pcache.cli.replay_parameters`);
it reads them into one driver's options, replays, and hands the result to its view."""

from __future__ import annotations

import inspect
from typing import Any

from pcache.cli import replay_parameters
from pcache.cli.replay_parameters import PanelCommand

__all__ = ["PanelCommand", "replay_command"]


def replay_command(**values: Any) -> None:
    """Replay a trace against a prefix cache: simulated, or measured through the engine.

    Example: pcache replay samples/traces/mooncake_tiny.jsonl --cache-blocks 8
    """
    from pcache import replay
    from pcache.cli import replay_endpoint, replay_view
    from pcache.cli.options import check_text_or_json
    from pcache.files import check_writable
    from pcache.prompt.reading.tables import with_columns

    format, output, plot = values.pop("format"), values.pop("output"), values.pop("plot")
    check_text_or_json(format)
    (trace,) = with_columns([values.pop("trace")], values.pop("column"))
    progress, redact = values.pop("progress"), values.pop("redact")
    options = _options(values, keep_requests=output is not None or plot is not None)
    if plot is not None:
        options.check_plot()
    for path in (output, plot):
        if path is not None:
            check_writable(path)
    if options.mode == "endpoint":
        replay_endpoint.run(trace, options, output, format, redact)
        return
    with replay_view.progress_bar(progress, format) as advance:
        result = replay(trace, options, progress=advance, redact=redact)
    replay_view.warn(trace, result)
    replay_view.show(result, options.mode, format, output, plot)


def _options(values: dict[str, Any], keep_requests: bool):
    """The chosen driver's options from the command's values (the view's taken out)."""
    from pcache.replayer.fleet.options import fleet_from_flags
    from pcache.replayer.run import replay_options
    from pcache.replayer.simulate.options import ttft_of

    mode = chosen_mode(values)
    values.pop("simulate")
    gpu = values.pop("gpu")
    fleet = fleet_from_flags(
        values.pop("replicas"),
        values.pop("router"),
        values.pop("router_param"),
        values.pop("chars_per_token"),
    )
    coefficients = replay_parameters.TTFT_PARAMETERS.items()
    ttft = ttft_of({field: values.pop(name) for name, field in coefficients})
    given = replay_parameters.driver_values(
        values, keep_requests=keep_requests, ttft=ttft, fleet=fleet
    )
    if gpu:
        given["device"] = "gpu"
    return replay_options(mode, **values, **given)


def chosen_mode(values: dict[str, Any]) -> str:
    """The driver the command's values choose: simulate, engine or endpoint."""
    return _mode(
        simulate=values.get("simulate"),
        engine=values.get("device"),
        gpu=values.get("gpu"),
        endpoint=values.get("url"),
    )


def _mode(**chosen: bool | str | None) -> str:
    """The driver the flags choose (`--simulate`, `--engine`, `--gpu`, `--endpoint`)."""
    from pcache.errors import UsageError

    given = [f"--{name}" for name, value in chosen.items() if value not in (None, False)]
    if len(given) > 1:
        raise UsageError(
            f"give one of --simulate, --engine, --gpu and --endpoint, not {' and '.join(given)}"
        )
    if chosen["endpoint"] is not None:
        return "endpoint"
    return "engine" if chosen["engine"] is not None or chosen["gpu"] else "simulate"


replay_command.__signature__ = inspect.Signature(replay_parameters.parameters())  # type: ignore[attr-defined]
