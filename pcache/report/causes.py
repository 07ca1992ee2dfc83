"""Why the prompts part at a branch point of the prefix tree, in `pcache diff`'s words.

At a branch point, the branch that arrived first was cached first; the largest later branch
is compared with it: its first request (B) against the first request of the earliest branch
(A), both rendered again from their files, and the one classifier
(`pcache.divergence.classify.explain`) names the cause (kind, JSON paths, excerpts) and the
lint rule it breaks, exactly as `pcache diff A B` and `pcache lint` do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pcache.divergence.causes import CAUSES
from pcache.divergence.classify import explain, make_cause
from pcache.divergence.sessions import pair_continues
from pcache.prompt.reading.loading import Document, iter_documents
from pcache.prompt.renderers.render import render
from pcache.prompt.shapes.request import request_from_document
from pcache.report.tree import Branch, iter_branches
from pcache.rules import rule_of
from pcache.text.prefix import common_prefix_length

NO_TEXT = "the block ids differ (a hash-id trace carries no text to say why)"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a request of the log came from."""

    path: str
    line: int | None
    label: str


@dataclass(slots=True)
class BranchPoint:
    """One labelled divergence of the prefix tree."""

    number: int
    branch: int
    """`Branch.id` of the node whose children part here."""
    token: int
    requests_before: int
    """Requests in the earliest branch (the prefix that was cached first)."""
    requests_after: int
    """Requests in the other branches: they stop reusing the shared prefix here."""
    kind: str
    summary: str
    hint: str
    a_request: str
    b_request: str
    a_path: str | None
    b_path: str | None
    a_excerpt: str
    b_excerpt: str
    detail: str = ""
    rule: dict[str, str] | None = None
    """The lint rule the cause breaks (`{"code", "name"}`), as `pcache diff` names it."""


def branch_points(root: Branch, limit: int) -> list[tuple[Branch, Branch, Branch]]:
    """The `limit` branch points where most requests leave a shared prefix: (node, earliest
    child, largest later child), most requests leaving first."""
    found = []
    for branch in iter_branches(root):
        if branch is root or len(branch.children) < 2:
            continue
        earliest = min(branch.children, key=lambda child: child.first_request)
        others = [child for child in branch.children if child is not earliest]
        leaving = sum(child.requests for child in others)
        later = max(others, key=lambda child: (child.requests, -child.first_request))
        found.append((leaving, branch, earliest, later))
    found.sort(key=lambda item: (-item[0], item[1].end))
    return [(branch, earliest, later) for _, branch, earliest, later in found[:limit]]


def explain_branch_points(
    points: list[tuple[Branch, Branch, Branch]],
    origins: Sequence[Origin] | None,
    settings,
    renderer,
) -> list[BranchPoint]:
    """Label each branch point. Without `origins` (hash-id traces: no text), the cause is the
    block ids' divergence only."""
    wanted = {child.first_request for _, a, b in points for child in (a, b)}
    rendered = _render(sorted(wanted), origins, settings, renderer) if origins else {}
    labelled = []
    for number, (branch, earliest, later) in enumerate(points, 1):
        a, b = earliest.first_request, later.first_request
        leaving = sum(child.requests for child in branch.children if child is not earliest)
        if a in rendered and b in rendered:
            ra, rb = rendered[a], rendered[b]
            token = common_prefix_length(ra.token_ids, rb.token_ids)
            if token == ra.num_tokens == rb.num_tokens:  # same tokens: the namespaces differ
                cause = make_cause("cache_salt", None, None, "", "")
            else:
                same = pair_continues(ra.request, rb.request)
                cause = explain(ra, rb, token, same_conversation=same).cause
            a_label, b_label = ra.request.label, rb.request.label
        else:
            token = branch.end
            cause = make_cause("token_ids", None, None, "", "")
            cause.hint = ""
            a_label = origins[a].label if origins else f"request {a}"
            b_label = origins[b].label if origins else f"request {b}"
        labelled.append(
            BranchPoint(
                number=number,
                branch=branch.id,
                token=token,
                requests_before=earliest.requests,
                requests_after=leaving,
                kind=cause.kind,
                summary=CAUSES[cause.kind].summary if origins else NO_TEXT,
                hint=cause.hint,
                a_request=a_label,
                b_request=b_label,
                a_path=cause.a_path,
                b_path=cause.b_path,
                a_excerpt=cause.a_excerpt,
                b_excerpt=cause.b_excerpt,
                detail=cause.detail,
                rule=rule_of(cause.kind),
            )
        )
    return labelled


def _render(indices: list[int], origins: Sequence[Origin], settings, renderer) -> dict:
    """The requests at `indices`, read again from their files and rendered as before; a file
    is read up to the last line wanted from it (documents come in line order)."""
    by_path: dict[str, dict[int | None, int]] = {}
    for index in indices:
        origin = origins[index]
        by_path.setdefault(origin.path, {})[origin.line] = index
    rendered = {}
    options = settings.render_options()
    for path, lines in by_path.items():
        numbered = [line for line in lines if line is not None]
        last = max(numbered) if len(numbered) == len(lines) else None
        for document in iter_documents(path, skip_errors=True):
            if not isinstance(document, Document):
                continue
            if last is not None and document.line is not None and document.line > last:
                break  # (the spans of one OTLP line are consecutive: all of them were seen)
            if document.line not in lines:
                continue
            index = lines[document.line]
            request = request_from_document(document.value, document.source, document.line)
            rendered[index] = render(request, renderer, options)
    return rendered
