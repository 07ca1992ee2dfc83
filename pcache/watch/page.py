"""The live page of a watch (`/`): one self-contained HTML page that reloads itself.

No script and nothing fetched from elsewhere: the page asks the browser to load it again every
few seconds (`<meta http-equiv="refresh">`). Every value is escaped; under `--redact` the
findings' messages and the groups' values were already written as their shapes.
"""

from __future__ import annotations

import time
from html import escape

from pcache.watch.status import WatchStatus

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222;padding:0 1em}
h1{font-size:1.4em;margin-bottom:.2em}h2{font-size:1.1em;margin-top:1.6em}
.meta{color:#666}table{border-collapse:collapse;width:100%}
td,th{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:left;vertical-align:top}
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.tiles{display:flex;gap:1em;flex-wrap:wrap}.tile{border:1px solid #ddd;border-radius:6px;
padding:.6em 1em;min-width:11em}.tile b{display:block;font-size:1.6em}
.bar{background:#eee;height:.6em;border-radius:3px}.bar i{display:block;height:100%;
background:#4a7;border-radius:3px}.waiting{color:#a60}code{font-size:.95em}
"""
SHOWN_GROUPS = 20
SHOWN_RULES = 20


def _share(value: float) -> str:
    return f"{100 * value:.1f}%"


def _bar(value: float) -> str:
    width = max(0.0, min(value, 1.0)) * 100
    return f'<div class="bar"><i style="width:{width:.1f}%"></i></div>'


def _tile(title: str, value: str, note: str = "") -> str:
    return f'<div class="tile">{escape(title)}<b>{value}</b>{note}</div>'


def render(status: WatchStatus, refresh_seconds: int) -> str:
    totals = status.totals
    polled = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(status.last_poll))
        if status.last_poll is not None
        else "not yet"
    )
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        f'<meta http-equiv="refresh" content="{refresh_seconds}">',
        f"<title>pcache watch {escape(status.log)}</title><style>{STYLE}</style></head><body>",
        f"<h1>pcache watch <code>{escape(status.log)}</code></h1>",
        f'<p class="meta">profile {escape(totals.profile)} · tokenizer'
        f" {escape(totals.tokenizer)} · block size {totals.block_size} · last poll {polled}"
        f" · {status.polls:,} polls · {status.follow.rotations:,} rotations ·"
        f" {status.follow.truncations:,} truncations · this page reloads every"
        f" {refresh_seconds} s</p>",
    ]
    if status.waiting:
        parts.append(f'<p class="waiting">waiting for {escape(status.log)}</p>')
    parts.append('<div class="tiles">')
    parts.append(_tile("requests", f"{totals.requests:,}", f"{totals.sessions:,} sessions"))
    parts.append(
        _tile(
            "cacheable as is",
            _share(totals.cacheable_ratio),
            _bar(totals.cacheable_ratio) + f"{totals.reusable_tokens:,} of"
            f" {totals.prompt_tokens:,} tokens",
        )
    )
    parts.append(
        _tile(
            "cacheable if fixed",
            _share(totals.cacheable_ratio_if_fixed),
            _bar(totals.cacheable_ratio_if_fixed) + f"{totals.reusable_tokens_if_fixed:,} of"
            f" {totals.prompt_tokens_if_fixed:,} tokens",
        )
    )
    if totals.observed_requests:
        parts.append(
            _tile(
                "observed cached",
                f"{totals.observed_cached_tokens:,}",
                f"predicted {totals.predicted_cached_tokens:,} in"
                f" {totals.observed_requests:,} requests",
            )
        )
    parts.append(_tile("lines skipped", f"{totals.unreadable:,}"))
    parts.append("</div>")
    parts.append(_rules(status))
    if totals.group_by:
        parts.append(_groups(status))
    parts.append(_findings(status))
    parts.append("</body></html>")
    return "\n".join(parts)


def _rules(status: WatchStatus) -> str:
    totals = status.totals
    reprefilled = totals.reprefilled_tokens
    rows = sorted(totals.rules, key=lambda t: (-t.tokens_reprefilled, -t.count, t.code))
    lines = [
        "<h2>Re-prefilled tokens by cause</h2><table>",
        '<tr><th>rule</th><th class="n">findings</th><th class="n">tokens a fix saves</th>'
        '<th class="n">of re-prefilled</th></tr>',
    ]
    for total in rows[:SHOWN_RULES]:
        share = total.tokens_reprefilled / reprefilled if reprefilled else 0.0
        lines.append(
            f"<tr><td><code>{escape(total.code)}</code> {escape(total.name)}</td>"
            f'<td class="n">{total.count:,}</td><td class="n">{total.tokens_reprefilled:,}</td>'
            f'<td class="n">{_share(share)}</td></tr>'
        )
    lines.append(
        f"<tr><td>no finding (first requests, new content, partial blocks)</td><td></td>"
        f'<td class="n">{totals.unattributed_tokens:,}</td><td></td></tr></table>'
    )
    return "\n".join(lines)


def _groups(status: WatchStatus) -> str:
    totals = status.totals
    keys = ", ".join(totals.group_by)
    lines = [
        f"<h2>By {escape(keys)}</h2><table>",
        '<tr><th>group</th><th class="n">requests</th><th class="n">prompt tokens</th>'
        '<th class="n">re-prefilled</th><th class="n">cacheable</th>'
        '<th class="n">if fixed</th></tr>',
    ]
    for group in totals.groups[:SHOWN_GROUPS]:
        ratio = group.reusable_tokens / group.prompt_tokens if group.prompt_tokens else 0.0
        fixed = group.prompt_tokens_if_fixed
        ratio_fixed = group.reusable_tokens_if_fixed / fixed if fixed else 0.0
        lines.append(
            f"<tr><td>{escape(group.name)}</td><td class=n>{group.requests:,}</td>"
            f"<td class=n>{group.prompt_tokens:,}</td>"
            f"<td class=n>{group.reprefilled_tokens:,}</td>"
            f"<td class=n>{_share(ratio)}</td><td class=n>{_share(ratio_fixed)}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


def _findings(status: WatchStatus) -> str:
    recent = list(reversed(status.totals.recent))
    if not recent:
        return "<h2>Latest findings</h2><p>none yet</p>"
    lines = [
        "<h2>Latest findings</h2><table>",
        "<tr><th>rule</th><th>where</th><th>message</th></tr>",
    ]
    for finding in recent:
        lines.append(
            f"<tr><td><code>{escape(finding.code)}</code></td>"
            f"<td>{escape(finding.request)}</td><td>{escape(finding.message)}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)
