"""A watch: poll the log, lint what was appended, keep the latest status.

Each line read becomes a request as `pcache lint` reads a JSONL log (the same reader, shapes
and Responses chains), and the requests of a poll are linted in pieces of `PIECE` by the pass
kept open between polls (`pcache.rules.incremental`), which bounds what a long first read of a
big log holds at once.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Iterator
from pathlib import Path

from pcache.errors import InputError
from pcache.prompt.reading.document import Document
from pcache.prompt.reading.expand import DocumentExpander
from pcache.prompt.reading.loading import parse_json
from pcache.prompt.shapes.request import Request, request_of
from pcache.rules.config import LintConfig
from pcache.rules.incremental import FollowedLint
from pcache.rules.runner import LintOptions, batched
from pcache.watch.follow import MAX_LINE_BYTES, Follower, Poll
from pcache.watch.status import WatchStatus

PIECE = 1000
"""Requests linted, then replayed in the fixed log, at a time."""


def label_name(key: str) -> str:
    """A `--group-by` key as a Prometheus label name (`metadata.app` -> `metadata_app`)."""
    name = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return name if not name[:1].isdigit() and not name.startswith("__") else f"key_{name}"


class Watcher:
    """Follows `log` and lints what it reads; `status` is the latest `WatchStatus` (replaced,
    never changed: another thread may read it at any time)."""

    def __init__(
        self,
        log: str,
        options: LintOptions,
        config: LintConfig | None = None,
        interval: float = 2.0,
        window_s: float | None = None,
    ):
        self.log = log
        self.follower = Follower(log)
        self.lint = FollowedLint(options, config, window_s)
        self.expander = DocumentExpander()
        self.interval = interval
        self.started = time.time()
        self.polls = 0
        labels = {key: label_name(key) for key in options.group_by}
        self.status = WatchStatus(
            log,
            self.lint.totals(),
            started=self.started,
            interval=interval,
            window=self.lint.window_s,
            group_labels=labels,
        )

    @property
    def exists(self) -> bool:
        return Path(self.log).exists()

    def step(self) -> Poll:
        """One poll: read what was appended, lint it, update `status`."""
        poll = self.follower.poll()
        items = list(self._items(poll))
        for piece in batched(items, PIECE):
            self.lint.add(piece)
        self.polls += 1
        self.status = dataclasses.replace(
            self.status,
            totals=self.lint.totals(),
            follow=dataclasses.replace(self.follower.stats),
            waiting=poll.missing and not self.follower.known,
            polls=self.polls,
            last_poll=time.time(),
        )
        return poll

    def catch_up(self) -> None:
        """Poll until what the log holds now is read."""
        while self.step().more:
            pass

    def _items(self, poll: Poll) -> Iterator[Request | InputError]:
        for source, line in poll.too_long:
            limit = MAX_LINE_BYTES // 2**20
            yield InputError(source, f"line longer than {limit} MiB, skipped", line)
        for line in poll.lines:
            try:
                value = parse_json(line.raw, line.source, line.number)
            except InputError as failure:
                yield failure
                continue
            document = Document(line.source, line.number, value, line.raw)
            for expanded in self.expander.expand(document):
                try:
                    yield request_of(expanded)
                except InputError as failure:
                    yield failure
