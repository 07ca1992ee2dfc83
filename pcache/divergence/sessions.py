"""Grouping requests into sessions: by explicit ids where present, else by conversation structure.

A request continues a session when it carries the same `session_id` (JSONL sidecar or
`metadata.session_id`), or when it shares `prompt_cache_key`/`user` with the session and
continues its conversation, or (without ids) when it repeats the session's latest user turn and
then goes on. Anything else starts a new session.

With a lifetime (the profile's longest cache lifetime) and timestamps, a session idle for longer
is closed: no cache holds its prefix any more, and a request that comes back to it starts a new
session. Open sessions are then those of one lifetime, not of the whole log.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from pcache.divergence.classify import RENDERED_PARAMETERS, prefix_messages
from pcache.divergence.history import squash
from pcache.prompt.shapes.request import Request


def message_key(message: dict[str, Any]) -> str:
    """A message as a later request of its conversation repeats it: other whitespace does not
    make it another message."""
    content = message.get("content")
    text = squash(content) if isinstance(content, str) else repr(content)
    key = f"{message['role']}\0{text}".encode("utf-8", "surrogatepass")  # any str has bytes
    return hashlib.blake2b(key, digest_size=12).hexdigest()


def _anchor(request: Request) -> str | None:
    """Key of the request's latest user message (what its successor repeats)."""
    for message in reversed(request.messages):
        if message["role"] == "user":
            return message_key(message)
    return None


def _first_turn(request: Request) -> str | None:
    for message in request.messages:
        if message["role"] not in ("system", "developer"):
            return message_key(message)
    return None


def continues(previous: Request, current: Request) -> bool:
    """Whether `current` carries on `previous`'s conversation (shared first turn or its anchor)."""
    anchor = _anchor(previous)
    if anchor is None:
        return False
    keys = [message_key(message) for message in current.messages[:-1]]
    return anchor in keys or (_first_turn(previous) == _first_turn(current) and len(keys) > 0)


@dataclass(slots=True)
class Assignment:
    session: str
    previous: Any | None
    """Whatever the caller stored for the session's previous request (None: a new session)."""


class SessionTracker:
    """Assigns each request to a session and remembers each open session's latest request."""

    def __init__(self, max_open: int = 100_000, lifetime_ms: float | None = None):
        self.max_open = max_open
        self.lifetime_ms = lifetime_ms
        self.latest: OrderedDict[str, tuple[Request, Any]] = OrderedDict()
        """Each open session's latest request, least recently continued first."""
        self.by_anchor: dict[str, str] = {}
        self.anchors: dict[str, str | None] = {}
        """The anchor (`_anchor`) of each open session's latest request."""
        self.count = 0
        self.clock: float | None = None
        """The latest timestamp seen."""

    def close_idle(self, now: float | None) -> None:
        """Close the sessions whose latest request is older than the lifetime before `now`
        (ms; None: the latest timestamp seen), least recently continued first."""
        if self.lifetime_ms is None:
            return
        if now is not None and (self.clock is None or now > self.clock):
            self.clock = now
        if self.clock is None:
            return
        cutoff = self.clock - self.lifetime_ms
        while self.latest:
            session, (request, _) = next(iter(self.latest.items()))
            if request.timestamp is None or request.timestamp >= cutoff:
                break
            self._forget(session, request)

    def _forget(self, session: str, request: Request) -> None:
        del self.latest[session]
        anchor = self.anchors.pop(session)
        if anchor is not None and self.by_anchor.get(anchor) == session:
            del self.by_anchor[anchor]

    def assign(self, request: Request) -> Assignment:
        explicit = request.session_id
        if explicit is not None:
            session = f"id:{explicit}"
            entry = self.latest.get(session)
            return Assignment(session, entry[1] if entry else None)
        scope = self._scope(request)
        if scope is not None:
            session = self._continued_in_scope(request, scope)
            if session is not None:
                return Assignment(session, self.latest[session][1])
            return Assignment(self._new(scope), None)
        for message in reversed(request.messages[:-1]):
            session = self.by_anchor.get(message_key(message))
            if session is not None and session in self.latest:
                previous, stored = self.latest[session]
                if continues(previous, request):
                    return Assignment(session, stored)
        return Assignment(self._new("s"), None)

    def record(self, session: str, request: Request, stored: Any) -> None:
        """Remember `request` (and what the caller keeps for it) as its session's latest."""
        old = self.latest.pop(session, None)
        if old is not None:
            anchor = self.anchors.pop(session)
            if anchor is not None and self.by_anchor.get(anchor) == session:
                del self.by_anchor[anchor]
        self.latest[session] = (request, stored)
        anchor = self.anchors[session] = _anchor(request)
        if anchor is not None:
            self.by_anchor[anchor] = session
        while len(self.latest) > self.max_open:
            evicted, (old_request, _) = next(iter(self.latest.items()))
            self._forget(evicted, old_request)

    def _scope(self, request: Request) -> str | None:
        raw = request.raw
        for key in ("prompt_cache_key", "user"):
            if isinstance(raw.get(key), str) and raw[key]:
                return f"{key}:{raw[key]}"
        return None

    def _continued_in_scope(self, request: Request, scope: str) -> str | None:
        for session in reversed(self.latest):
            if not session.startswith(scope + "#"):
                continue
            if continues(self.latest[session][0], request):
                return session
        return None

    def _new(self, scope: str) -> str:
        self.count += 1
        return f"{scope}#{self.count}"


def pair_continues(a: Request, b: Request) -> bool:
    """Whether B, shown beside A (`pcache diff A B`), carries on A's conversation: explicit ids
    decide when both have them; otherwise B continues A as the session grouping judges it, or
    starts with A's first turn (a later or an edited version of the same conversation)."""
    if distinct_conversations(a, b):
        return False
    if a.session_id is not None and a.session_id == b.session_id:
        return True
    tracker = SessionTracker()
    first = tracker.assign(a).session
    tracker.record(first, a, None)
    if tracker.assign(b).session == first:
        return True
    if _first_turn(a) is not None and _first_turn(a) == _first_turn(b):
        return True
    if sum(message["role"] == "user" for message in a.messages) < 2:
        return False  # a first question alone does not tell two conversations apart
    anchor = _anchor(a)
    return any(message_key(message) == anchor for message in b.messages)


def distinct_conversations(a: Request, b: Request) -> bool:
    """Explicit ids say the two requests belong to different conversations: different
    `session_id`s (sidecar or metadata), or different `user`s."""
    if a.session_id is not None and b.session_id is not None and a.session_id != b.session_id:
        return True
    users = a.raw.get("user"), b.raw.get("user")
    return all(isinstance(u, str) and u for u in users) and users[0] != users[1]


def prefix_part(request: Request) -> bytes:
    """A digest of the shared part of a request as sent: tools, the system and developer
    messages ahead of the first turn, the parameters a template renders (key order counts).
    Two conversations that send the same part part where each one's own messages begin."""
    global _last_part
    parameters = [request.raw.get(key) for key in RENDERED_PARAMETERS]
    sent = orjson.dumps([request.cache_salt, request.tools, parameters, prefix_messages(request)])
    if sent != _last_part[0]:  # consecutive requests mostly send the same part
        _last_part = (sent, hashlib.blake2b(sent, digest_size=16).digest())
    return _last_part[1]


_last_part: tuple[bytes, bytes] = (b"", b"")
"""The last shared part serialized, and its digest."""
