"""What a check may read: the current request, its session predecessor, and the app seen so far.

Every check receives one `LintContext`. Single-request rules read `ctx.current` only; cross-request
rules return early unless `ctx.previous` (the previous request of the same session) is set;
app-level rules read `ctx.app` (the first request of other sessions, and a once-per-app memory).
"""

from __future__ import annotations

import dataclasses
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pcache.cache.hashing import DEFAULT_BLOCK_SIZE
from pcache.cache.profiles import Profile
from pcache.errors import TokenizerError
from pcache.prompt.renderers.interface import DEFAULT_DATE, Renderer, RenderOptions, SegmentRenderer
from pcache.prompt.renderers.provenance import DeferredSpans, message_index
from pcache.prompt.renderers.render import render
from pcache.prompt.renderers.rendered import RenderedPrompt
from pcache.prompt.shapes.request import KIND_ANTHROPIC, KIND_OPENAI, Request
from pcache.text.prefix import common_prefix_length

CONTENT_ROLES = ("system", "developer")


@dataclass(frozen=True, slots=True)
class LintSettings:
    """How requests are rendered and costed while linting."""

    renderer: Renderer
    profile: Profile
    block_size: int = DEFAULT_BLOCK_SIZE
    date: str = DEFAULT_DATE

    def options(self, add_generation_prompt: bool = True) -> RenderOptions:
        return RenderOptions(date=self.date, add_generation_prompt=add_generation_prompt)


_SEGMENTS: dict[type, bool] = {}


def segments_of(renderer: Renderer) -> bool:
    """Whether the renderer encodes piece by piece (`SegmentRenderer`), decided once per type:
    a runtime protocol check costs microseconds, and every request asks."""
    kind = type(renderer)
    if kind not in _SEGMENTS:
        _SEGMENTS[kind] = isinstance(renderer, SegmentRenderer)
    return _SEGMENTS[kind]


class RequestContext:
    """One request and lazily computed renders of it."""

    def __init__(
        self,
        request: Request,
        settings: LintSettings,
        session: str = "",
        text: tuple[str, DeferredSpans] | None = None,
        token_ids: list[int] | None = None,
    ):
        """`text`: the request's rendered text and spans, when rendered before
        (`pcache.pipeline.RenderStage`); `token_ids`: its ids, when computed elsewhere
        (`pcache.rules.token_worker`: the text is rendered again if asked for)."""
        self.request = request
        self.settings = settings
        self.session = session
        self.identity = identity_of(request)
        self._rendered: RenderedPrompt | None = None
        self._text: tuple[str, DeferredSpans] | None = text
        self._token_ids: list[int] | None = token_ids
        self._segments: Any = None
        self._slots: list[tuple[tuple, str, str]] | None = None
        self._prefix_tokens: dict[tuple[int, bool], list[int]] = {}
        self._prefix_part: bytes | None = None

    @property
    def is_chat(self) -> bool:
        return is_chat(self.request)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.request.messages

    @property
    def prefix_slots(self) -> list[tuple[tuple, str, str]]:
        """(slot, normalized path, text) of what every request sends again (`prefix_texts`)."""
        if self._slots is None:
            from pcache.rules.slots import prefix_texts

            self._slots = list(prefix_texts(self.request))
        return self._slots

    def slot_map(self) -> dict[tuple, tuple[str, str]]:
        return {slot: (path, text) for slot, path, text in self.prefix_slots}

    @property
    def token_ids(self) -> list[int]:
        """The rendered prompt's token ids (character offsets are computed only if needed)."""
        if self._rendered is not None:
            return self._rendered.token_ids
        if self._token_ids is None:
            renderer = self.settings.renderer
            if not self.is_chat or not segments_of(renderer):
                return self.rendered.token_ids
            if self._text is None:
                self._text = renderer.render_text_deferred(self.request, self.settings.options())
            self._token_ids, self._segments = renderer.encode_segments(self._text[0])
        return self._token_ids

    @property
    def rendered(self) -> RenderedPrompt:
        if self._rendered is None:
            renderer = self.settings.renderer
            if self._token_ids is not None and self._text is not None:
                text, spans = self._text
                starts = renderer.starts(text, self._segments)
                self._rendered = RenderedPrompt(
                    self.request,
                    text,
                    self._token_ids,
                    starts,
                    spans.spans(),
                    renderer.name,
                    renderer.template_digest,
                )
            else:
                rendered = render(self.request, renderer, self.settings.options())
                if self._token_ids is not None:  # ids from elsewhere: keep that list
                    assert rendered.token_ids == self._token_ids, "the ids differ from a render"
                    rendered.token_ids = self._token_ids
                self._rendered = rendered
            self._text = self._token_ids = self._segments = None
        return self._rendered

    def render_messages(self, count: int, add_generation_prompt: bool = False) -> list[int]:
        """Token ids of this request rendered with only its first `count` messages."""
        key = (count, add_generation_prompt)
        if key not in self._prefix_tokens:
            truncated = dataclasses.replace(self.request, messages=self.request.messages[:count])
            options = self.settings.options(add_generation_prompt)
            renderer = self.settings.renderer
            if segments_of(renderer):
                try:
                    text, _ = renderer.render_text_deferred(truncated, options)
                except TokenizerError:  # e.g. Llama 3.1 puts tools into the first user message
                    self._prefix_tokens[key] = self._tokens_before_paths_of(count)
                else:
                    self._prefix_tokens[key] = renderer.encode(text)
            else:
                self._prefix_tokens[key] = render(truncated, renderer, options).token_ids
        return self._prefix_tokens[key]

    def _tokens_before_paths_of(self, count: int) -> list[int]:
        """The tokens of the full render before the first text from messages[count:], for a
        template that refuses to render only the first `count` messages."""
        token_ids = self.token_ids
        if self._text is not None:  # not rendered with its spans yet: one fenced render
            text, spans = self._text
            first = spans.message_start(count)
            if first is None:
                return token_ids
            return token_ids[: self.settings.renderer.token_of_char(text, self._segments, first)]
        starts = [
            span.start for span in self.rendered.spans if message_index(span.normalized) >= count
        ]
        return token_ids[: self.token_of_char(min(starts))] if starts else token_ids

    def tokens_before_message(self, index: int) -> int:
        """Tokens of the full render shared with a render that stops before message `index`."""
        if not self.is_chat:
            return 0
        return common_prefix_length(self.render_messages(index), self.token_ids)

    @property
    def first_turn_index(self) -> int:
        """Index of the first message that is not a system or developer message."""
        for index, message in enumerate(self.messages):
            if message["role"] not in CONTENT_ROLES:
                return index
        return len(self.messages)

    def source_path(self, normalized: str) -> str:
        return self.request.source_path(normalized)

    def token_of_path(self, source_path: str) -> int | None:
        """First token rendered from `source_path` (or anything under it)."""
        rendered = self.rendered
        for span in rendered.spans:
            if span.path == source_path or span.path.startswith(
                (source_path + ".", source_path + "[")
            ):
                return self.token_of_char(span.start)
        return None

    def token_of_char(self, char: int) -> int:
        starts = self.rendered.token_starts
        return max(0, bisect_right(starts, char) - 1)

    def text_of_path(self, source_path: str) -> str:
        """The rendered text that came from `source_path` (or anything under it)."""
        rendered = self.rendered
        return "".join(
            rendered.text[span.start : span.end]
            for span in rendered.spans
            if span.path == source_path
            or span.path.startswith((source_path + ".", source_path + "["))
        )

    @property
    def prefix_part(self) -> bytes:
        """The shared part as sent (`sessions.prefix_part`), computed once."""
        if self._prefix_part is None:
            from pcache.divergence.sessions import prefix_part

            self._prefix_part = prefix_part(self.request)
        return self._prefix_part

    @property
    def is_rendered(self) -> bool:
        """Whether the render with character offsets is held (else `rendered` computes it)."""
        return self._rendered is not None

    def release(self) -> None:
        """Drop renders; they are recomputed if a later request of the session needs them."""
        self._prefix_tokens.clear()
        self._rendered = None
        self._text = self._token_ids = self._segments = None


@dataclass(slots=True)
class SessionHead:
    """The first request of a session, kept for comparisons across sessions."""

    session: str
    identity: str
    context: RequestContext


@dataclass(slots=True)
class AppState:
    """What the runner remembers about the whole set (one application)."""

    max_heads: int = 64
    heads: OrderedDict[str, SessionHead] = field(default_factory=OrderedDict)
    seen: set[Any] = field(default_factory=set)
    cache: dict[Any, Any] = field(default_factory=dict)
    """Results that depend only on content repeated across requests (e.g. schema checks)."""

    def once(self, key: Any) -> bool:
        """True the first time `key` is seen in this run."""
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def add_head(self, head: SessionHead) -> None:
        self.heads[head.session] = head
        while len(self.heads) > self.max_heads:
            self.heads.popitem(last=False)

    def other_heads(self, session: str) -> list[SessionHead]:
        return [head for key, head in reversed(self.heads.items()) if key != session]


@dataclass(slots=True)
class LintContext:
    """What one check sees."""

    current: RequestContext
    previous: RequestContext | None
    app: AppState
    is_session_head: bool
    cached_prefix: int = 0
    """Tokens of the current request shared with the longest cached prefix of an earlier
    request (`pcache.cache.reuse`: what an unlimited serial replay finds)."""
    memo: dict[str, Any] = field(default_factory=dict)
    """Results several rules share (e.g. the history comparison), computed once."""

    @property
    def settings(self) -> LintSettings:
        return self.current.settings


def is_chat(request: Request) -> bool:
    """Whether the request is rendered by the chat template (else its text or ids are used)."""
    return request.kind in (KIND_OPENAI, KIND_ANTHROPIC)


def has_cache_marker(request: Request) -> bool:
    """Whether the request marks a cache breakpoint: a marked block, or a top-level
    `cache_control` (Anthropic automatic mode)."""
    return bool(request.breakpoints) or isinstance(request.raw.get("cache_control"), dict)


def identity_of(request: Request) -> str:
    """Who a request is for: `user`, metadata user ids, or the session key."""
    raw = request.raw
    if isinstance(raw.get("user"), str):
        return raw["user"]
    metadata = raw.get("metadata")
    if isinstance(metadata, dict):
        for key in ("user_id", "user", "tenant_id"):
            if isinstance(metadata.get(key), str | int):
                return str(metadata[key])
    return ""
