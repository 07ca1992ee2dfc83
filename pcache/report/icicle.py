"""Layout of the prefix tree as an icicle: x is the token position, a band's height the share
of requests that went through it, so its area is the prompt tokens it stands for.

Children are stacked in arrival order (the branch cached first on top); the requests that end
at a node leave the rest of its band empty.
"""

from __future__ import annotations

from dataclasses import dataclass

from pcache.report.build import PrefixTree, TreeNode

WIDTH = 1000.0
HEIGHT = 420.0
MIN_WIDTH = 0.6


@dataclass(frozen=True, slots=True)
class Box:
    kind: str
    """reused, shared (shared but below what the cache reuses), unique, folded."""
    x: float
    y: float
    width: float
    height: float
    title: str


@dataclass(frozen=True, slots=True)
class Marker:
    number: int
    x: float
    y: float
    title: str
    label: str
    """The cause's kind, written beside the marker."""
    anchor: str = "start"


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(slots=True)
class Icicle:
    boxes: list[Box]
    markers: list[Marker]
    ticks: list[Tick]
    width: float = WIDTH
    height: float = HEIGHT


def layout(tree: PrefixTree) -> Icicle:
    scale = WIDTH / max(tree.max_tokens, 1)
    boxes: list[Box] = []
    centres: dict[int, tuple[float, float]] = {}

    def place(node: TreeNode, top: float, height: float) -> None:
        if node.end > node.start or node.folded:
            _boxes(node, top, height, scale, boxes)
        centres[node.id] = (node.end * scale, top + height / 2)
        offset = top
        for child in node.children:
            share = height * child.requests / node.requests if node.requests else 0.0
            place(child, offset, share)
            offset += share

    place(tree.root, 0.0, HEIGHT)
    markers = []
    for point in tree.branch_points:
        x, y = centres.get(point.branch, (0.0, 0.0))
        title = f"#{point.number} at token {point.token:,}: {point.summary}"
        x = min(x, WIDTH - 10)
        anchor = "end" if x > WIDTH * 0.8 else "start"
        while any(abs(x - m.x) < 80 and abs(y - m.y) < 16 for m in markers):
            y += 18  # one label under the other, not over it
        markers.append(Marker(point.number, x, y, title, point.kind, anchor))
    return Icicle(boxes, markers, _ticks(tree.max_tokens, scale))


def _boxes(node: TreeNode, top: float, height: float, scale: float, boxes: list[Box]) -> None:
    span = f"tokens {node.start:,}–{node.end:,} · {node.requests:,} request"
    span += "" if node.requests == 1 else "s"
    if node.folded:
        title = f"{node.folded:,} smaller branches folded · {node.requests:,} requests"
        offset = top
        for requests, end in node.strips:
            share = height * requests / node.requests
            what = f"{title}; {requests:,} of them end near token {end:,}"
            boxes.append(
                _box("folded", node.start, max(end, node.start), offset, share, scale, what)
            )
            offset += share
        return
    first = f" · first: {node.first_request}"
    if node.reused_end > node.start:
        title = f"{span}{first} · reused by the {node.requests - 1:,} later requests"
        boxes.append(_box("reused", node.start, node.reused_end, top, height, scale, title))
    if node.end > node.reused_end:
        if node.requests > 1:
            kind, what = (
                "shared",
                "shared, but below what the cache reuses (partial block, minimum)",
            )
        else:
            kind, what = "unique", "one request: computed once, reused by none"
        title = f"{span}{first} · {what}"
        boxes.append(_box(kind, node.reused_end, node.end, top, height, scale, title))


def _box(kind, start, end, top, height, scale, title) -> Box:
    width = max((end - start) * scale, MIN_WIDTH)
    return Box(
        kind, round(start * scale, 2), round(top, 2), round(width, 2), round(height, 2), title
    )


def _ticks(max_tokens: int, scale: float) -> list[Tick]:
    if max_tokens <= 0:
        return [Tick(0.0, "0")]
    raw = max_tokens / 5
    magnitude = 10 ** (len(str(int(raw))) - 1)
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return [Tick(round(v * scale, 2), f"{v:,}") for v in range(0, max_tokens + 1, step)]
