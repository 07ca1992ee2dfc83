"""A `WatchStatus` in the Prometheus text exposition format (version 0.0.4), as `/metrics`
serves it and `pcache watch --once --format prometheus` prints it (a node exporter's textfile
collector reads that file).

Counters only grow while the watch runs (a rule's total included: `pcache.rules.incremental`);
the ratios are of everything read since the watch started. A window's cacheable share is
`rate(pcache_reusable_tokens_total[5m]) / rate(pcache_prompt_tokens_total[5m])`.
"""

from __future__ import annotations

from collections.abc import Iterable

from pcache.watch.status import WatchStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Sample = tuple[dict[str, str], float]


def escape_label(value: str) -> str:
    """A label value as the format quotes it: backslash, double quote and line feed escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _family(name: str, kind: str, help: str, samples: Iterable[Sample]) -> list[str]:
    lines = [f"# HELP {name} {escape_help(help)}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        inside = ",".join(f'{key}="{escape_label(str(v))}"' for key, v in labels.items())
        lines.append(
            f"{name}{{{inside}}} {_number(value)}" if inside else f"{name} {_number(value)}"
        )
    return lines


def render(status: WatchStatus) -> str:
    """The metrics of `status`, one family after another."""
    totals = status.totals
    follow = status.follow
    lines: list[str] = []

    def counter(name: str, help: str, samples: Iterable[Sample]) -> None:
        lines.extend(_family(f"pcache_{name}_total", "counter", help, samples))

    def gauge(name: str, help: str, samples: Iterable[Sample]) -> None:
        lines.extend(_family(f"pcache_{name}", "gauge", help, samples))

    def one(value: float) -> list[Sample]:
        return [({}, value)]

    info = {
        "log": status.log,
        "profile": totals.profile,
        "tokenizer": totals.tokenizer,
        "block_size": str(totals.block_size),
    }
    gauge("watch_info", "The watched log and the cache that prices its findings.", [(info, 1)])
    gauge(
        "window_seconds",
        "How long a prefix or a session no request used is kept.",
        one(status.window),
    )
    counter("requests", "Requests linted.", one(totals.requests))
    counter("sessions", "Conversations started.", one(totals.sessions))
    counter("prompt_tokens", "Prompt tokens of the requests linted.", one(totals.prompt_tokens))
    counter(
        "reusable_tokens",
        "Prompt tokens the cache reuses as the log is (predicted cached tokens).",
        one(totals.reusable_tokens),
    )
    counter(
        "reprefilled_tokens",
        "Prompt tokens prefilled again although an earlier request had sent them.",
        one(totals.reprefilled_tokens),
    )
    counter(
        "prompt_tokens_if_fixed",
        "Prompt tokens of the log with every finding's fix applied.",
        one(totals.prompt_tokens_if_fixed),
    )
    counter(
        "reusable_tokens_if_fixed",
        "Prompt tokens the cache reuses in the log with every finding's fix applied.",
        one(totals.reusable_tokens_if_fixed),
    )
    gauge(
        "cacheable_ratio",
        "Reusable share of the prompt tokens linted, as is.",
        one(round(totals.cacheable_ratio, 6)),
    )
    gauge(
        "cacheable_ratio_if_fixed",
        "Reusable share of the prompt tokens linted, with the fixes applied.",
        one(round(totals.cacheable_ratio_if_fixed, 6)),
    )
    counter(
        "rule_findings",
        "Findings, by rule.",
        [({"rule": t.code, "name": t.name}, t.count) for t in totals.rules],
    )
    counter(
        "rule_reprefilled_tokens",
        "Re-prefilled tokens the rule's fix saves, by rule.",
        [({"rule": t.code, "name": t.name}, t.tokens_reprefilled) for t in totals.rules],
    )
    counter(
        "unattributed_tokens",
        "Re-prefilled tokens no finding is charged (first requests, new content, partial blocks).",
        one(totals.unattributed_tokens),
    )
    if totals.group_by:
        names = [status.group_labels.get(key, key) for key in totals.group_by]

        pairs = list(zip(names, totals.group_by, strict=True))

        def by_group(read) -> list[Sample]:
            return [
                ({name: group.key[key] for name, key in pairs}, read(group))
                for group in totals.groups
            ]

        counter("group_requests", "Requests, by group.", by_group(lambda g: g.requests))
        counter(
            "group_prompt_tokens", "Prompt tokens, by group.", by_group(lambda g: g.prompt_tokens)
        )
        counter(
            "group_reusable_tokens",
            "Reusable prompt tokens as is, by group.",
            by_group(lambda g: g.reusable_tokens),
        )
        counter(
            "group_reprefilled_tokens",
            "Re-prefilled prompt tokens as is, by group.",
            by_group(lambda g: g.reprefilled_tokens),
        )
        counter(
            "group_prompt_tokens_if_fixed",
            "Prompt tokens with the fixes applied, by group.",
            by_group(lambda g: g.prompt_tokens_if_fixed),
        )
        counter(
            "group_reusable_tokens_if_fixed",
            "Reusable prompt tokens with the fixes applied, by group.",
            by_group(lambda g: g.reusable_tokens_if_fixed),
        )
    counter(
        "observed_requests",
        "Requests whose log line reports the provider's cached tokens.",
        one(totals.observed_requests),
    )
    counter(
        "observed_cached_tokens",
        "Cached tokens the provider reported, in those requests.",
        one(totals.observed_cached_tokens),
    )
    counter(
        "predicted_cached_tokens",
        "Cached tokens pcache predicts, in the same requests.",
        one(totals.predicted_cached_tokens),
    )
    counter(
        "observed_disagreeing_requests",
        "Requests whose reported cached tokens differ from the prediction.",
        one(totals.observed_disagreeing),
    )
    counter("lines_read", "Non-blank lines read from the log.", one(follow.lines_read))
    counter(
        "lines_skipped",
        "Lines and requests that could not be read or rendered.",
        one(totals.unreadable),
    )
    counter("bytes_read", "Bytes of complete lines read.", one(follow.bytes_read))
    counter("rotations", "Log files rotated away (renamed or removed).", one(follow.rotations))
    counter(
        "truncations", "Log files truncated (read again from their start).", one(follow.truncations)
    )
    counter("polls", "Polls of the log.", one(status.polls))
    gauge("log_waiting", "1 while the log does not exist yet.", one(int(status.waiting)))
    if status.last_poll is not None:
        gauge(
            "last_poll_timestamp_seconds",
            "When the last poll ended (seconds since the epoch).",
            one(round(status.last_poll, 3)),
        )
    return "\n".join(lines) + "\n"
