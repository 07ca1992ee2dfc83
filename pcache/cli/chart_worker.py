"""`ChartWorker`: a process that draws `pcache report`'s charts while the command builds the
report.

Started with `spawn` (a fresh interpreter: the same on every platform and under any default
start method, whatever threads this process runs), the worker imports matplotlib at once,
while this process lints the log, then draws the charts it is sent (`draw`: the calls of
`pcache.report.page.chart_calls`, plain values) while this process grows the prefix tree and
fills the page. `charts()` returns their markup: the worker's, or drawn here where no worker
could be started, it failed or went away, or the calls could not be sent, so that the page is
the same either way. Close it (`with`) when done.
"""

from __future__ import annotations

import contextlib
from typing import Any

JOIN_TIMEOUT_S = 5.0
"""How long a worker that has sent its charts may take to exit before it is killed."""


def serve(calls: Any, results: Any) -> None:
    """The worker: import matplotlib, then draw the one set of chart calls it is sent (none:
    the command needs no charts) and send back their markup."""
    from pcache.report.charts import preload
    from pcache.report.page import draw_charts

    try:
        preload()
        sent = calls.recv()
        if sent is not None:
            results.send(("drawn", draw_charts(sent)))
    except BaseException:  # whatever it was, the command draws the charts itself
        pass
    finally:
        calls.close()
        results.close()


class ChartWorker:
    """The worker process and the two ends of its pipes this process holds; no process where
    `jobs` leaves no second core to draw on or none could be started."""

    def __init__(self, jobs: int):
        self.process: Any = None
        self.calls: Any = None
        self.results: Any = None
        self.sent: dict[str, Any] | None = None
        if jobs <= 1:
            return
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        calls_end, self.calls = context.Pipe(duplex=False)
        self.results, results_end = context.Pipe(duplex=False)
        process = context.Process(
            target=serve, args=(calls_end, results_end), name="pcache-charts", daemon=True
        )
        try:
            process.start()
        except Exception:  # (limits, memory, no interpreter to start): drawn here
            self.calls.close()
            self.results.close()
            return
        finally:
            calls_end.close()  # (the worker holds its own ends: its exit ends `recv` here)
            results_end.close()
        self.process = process

    @property
    def running(self) -> bool:
        """Whether a worker imports matplotlib, waits for the calls or draws them."""
        return self.process is not None

    def draw(self, calls: dict[str, Any]) -> None:
        """Have the charts of `calls` drawn (by the worker, if it runs)."""
        assert self.sent is None, "a ChartWorker draws one set of charts"
        self.sent = calls
        if self.process is None:
            return
        try:
            self.calls.send(calls)
        except Exception:  # (unpicklable, or the worker is gone): drawn here
            self.close()

    def charts(self) -> dict[str, str | None]:
        """Each chart's SVG markup (None where not drawn): the worker's, else drawn here."""
        from pcache.report.page import draw_charts

        assert self.sent is not None, "draw() first"
        if self.process is None:
            return draw_charts(self.sent)
        try:
            message = self.results.recv()
        except (EOFError, OSError):
            message = None
        self.close()
        if isinstance(message, tuple) and message[0] == "drawn":
            return message[1]
        return draw_charts(self.sent)

    def close(self) -> None:
        """End the worker (told to, if it still waits for the calls)."""
        if self.process is None:
            return
        if self.sent is None:
            with contextlib.suppress(Exception):
                self.calls.send(None)
        self.calls.close()
        self.results.close()
        self.process.join(JOIN_TIMEOUT_S)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.process = None

    def __enter__(self) -> ChartWorker:
        return self

    def __exit__(self, *failure: object) -> None:
        self.close()
