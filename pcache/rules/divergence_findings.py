"""A divergence charged in lint, as the finding its rule reports: where, what changed, since
which earlier request, and what undoing it saves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pcache.rules.base import Violation
from pcache.rules.patterns import short

if TYPE_CHECKING:
    from pcache.rules.context import RequestContext
    from pcache.rules.cost import Charge

STRUCTURAL_CAUSES = frozenset(
    {"tool_order", "tool_set", "history_truncated", "compaction", "system_message_moved"}
)
"""Causes whose message names what moved; quoting the text there says nothing more."""
HISTORY_CAUSES = frozenset(
    {"history_edit", "history_truncated", "compaction", "system_message_moved"}
)
"""Causes about a message as a whole: reported at the message."""


def divergence_violation(
    charge: Charge, current: RequestContext, previous: RequestContext | None
) -> Violation:
    """The finding of `charge` in the request `current` (`previous`: its session's)."""
    divergence = charge.divergence
    cause = divergence.cause
    holder = charge.holder.context
    if previous is not None and holder is previous:
        where = "the previous request"
    elif charge.holder.session == current.session:
        where = f"an earlier request of this session ({holder.request.label})"
    else:
        where = f"request {holder.request.label}"
    detail = f" ({cause.detail})" if cause.detail else ""
    values = ""
    if cause.kind not in STRUCTURAL_CAUSES:
        values = f": {short(divergence.a_value)} -> {short(divergence.b_value)}"
    message = f"{cause.summary}{detail} since {where}{values}"
    path = cause.b_path or ""
    if cause.kind in HISTORY_CAUSES and divergence.b_unit:
        path = current.request.source_path(divergence.b_unit)
    if cause.kind == "parameter" and cause.detail:
        path = current.request.source_path(cause.detail.split(" ")[0])
    return Violation(
        message,
        path,
        token_position=charge.position,
        fix_title=cause.hint,
        at_template=cause.kind == "template",
    )
