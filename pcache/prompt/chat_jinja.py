"""The sandboxed Jinja environment Hugging Face chat templates are written for.

It reproduces what transformers 5.x builds in `_cached_compile_jinja_template`: an
`ImmutableSandboxedEnvironment` with `trim_blocks`, `lstrip_blocks`, loop controls and the
`{% generation %}` tag; a `tojson` filter that keeps key order and non-ASCII text; the globals
`raise_exception`, `strftime_now`, `dict` and `namespace`. Unlike transformers, `strftime_now`
reads a pinned date (`pinned_date`) instead of the clock, so a render is reproducible.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, ClassVar

from pcache.prompt.tokenizer import DEFAULT_DATE

REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")
"""Names a message's reasoning goes by; templates read `reasoning_content` (gpt-oss: `thinking`)."""


_REASONING = frozenset(REASONING_KEYS)

_PINNED_DATE: ContextVar[str] = ContextVar("pinned_date", default=DEFAULT_DATE)


@contextmanager
def pinned_date(date: str):
    """Make `strftime_now` format midnight of `date` (YYYY-MM-DD) while rendering."""
    token = _PINNED_DATE.set(date)
    try:
        yield
    finally:
        _PINNED_DATE.reset(token)


def _strftime_now(format: str) -> str:
    return datetime.fromisoformat(_PINNED_DATE.get()).strftime(format)


class TemplateRaised(Exception):
    """The template called `raise_exception(message)`."""


class _IndentedDumps:
    """`json.dumps` with an indent runs in pure Python, and templates indent the same tools in
    every request: results are kept under the compact dump (C-fast), which determines them."""

    max_chars = 4_000_000

    def __init__(self) -> None:
        self.texts: dict[tuple, str] = {}
        self.chars = 0

    def dumps(self, value: Any, ensure_ascii, indent, separators, sort_keys) -> str:
        def dump() -> str:
            return json.dumps(
                value,
                ensure_ascii=ensure_ascii,
                indent=indent,
                separators=separators,
                sort_keys=sort_keys,
            )

        compact = json.dumps(value, ensure_ascii=False, sort_keys=sort_keys)
        key = (compact, ensure_ascii, indent, separators)
        try:
            text = self.texts.get(key)
        except TypeError:  # an unhashable argument (separators as a list): not remembered
            return dump()
        if text is None:
            text = dump()
            size = len(compact) + len(text)
            if self.chars + size > self.max_chars:
                self.texts.clear()
                self.chars = 0
            if size <= self.max_chars:
                self.texts[key] = text
                self.chars += size
        return text


_INDENTED = _IndentedDumps()


def _tojson(value: Any, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    if indent is not None:
        return _INDENTED.dumps(value, ensure_ascii, indent, separators, sort_keys)
    return json.dumps(value, ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: Any) -> None:
    raise TemplateRaised(str(message))


class _TemplateDict:
    """`dict(...)` for templates, without the attribute access of the real type."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


def _make_namespace_class():
    import jinja2.exceptions
    import jinja2.utils

    def check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"templates cannot store underscore-prefixed attributes on a namespace: {name!r}"
            )

    class TemplateNamespace(jinja2.utils.Namespace):
        """`namespace(...)` that refuses underscore-prefixed attribute names."""

        def __init__(*args: Any, **kwargs: Any) -> None:
            self, rest = args[0], args[1:]
            attributes = dict(*rest, **kwargs)
            for name in attributes:
                check_name(name)
            jinja2.utils.Namespace.__init__(self, attributes)

        def __setitem__(self, name: str, value: Any) -> None:
            check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

    return TemplateNamespace


def _make_generation_extension():
    import jinja2.ext
    import jinja2.nodes

    class GenerationTag(jinja2.ext.Extension):
        """`{% generation %}...{% endgeneration %}` renders its body unchanged."""

        tags: ClassVar[set[str]] = {"generation"}

        def parse(self, parser):
            line = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            call = self.call_method("_render_body")
            return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(line)

        def _render_body(self, caller) -> str:
            return caller()

    return GenerationTag


def make_environment():
    """A fresh sandboxed environment; render inside `pinned_date(...)` to set the clock."""
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    environment = ImmutableSandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_make_generation_extension(), jinja2.ext.loopcontrols],
    )
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    environment.globals["dict"] = _TemplateDict()
    environment.globals["namespace"] = _make_namespace_class()
    return environment


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as transformers hands them to a template: None-valued keys dropped, reasoning
    copied to `thinking` (first) and `reasoning_content` (last). A message that needs neither
    is passed as it is (the sandbox is immutable: templates cannot change it)."""
    prepared = []
    for message in messages:
        if None not in message.values() and _REASONING.isdisjoint(message):
            prepared.append(message)
            continue
        message = {key: value for key, value in message.items() if value is not None}
        reasoning = next((message[key] for key in REASONING_KEYS if key in message), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        prepared.append(message)
    return prepared
