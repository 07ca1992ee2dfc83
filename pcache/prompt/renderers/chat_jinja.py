"""The sandboxed Jinja environment Hugging Face chat templates are written for.

It reproduces what transformers 5.x builds in `_cached_compile_jinja_template`: an
`ImmutableSandboxedEnvironment` with `trim_blocks`, `lstrip_blocks`, loop controls and the
`{% generation %}` tag; a `tojson` filter that keeps key order and non-ASCII text; the globals
`raise_exception`, `strftime_now`, `dict` and `namespace`. Unlike transformers, `strftime_now`
reads a pinned date (`pinned_date`) instead of the clock, so a render is reproducible.

A template is code from the internet, so a render is also bounded, without threads or signals
(it works the same on every platform): every loop iteration, call and piece of output counts
against a deadline of `TIME_LIMIT_S` seconds, and the output, every string a call returns and
every `*`, `+`, `**` and `%` result against `MAX_OUTPUT_CHARS` characters, checked before the
operands are combined where the size is known in advance. Past either bound the render stops
with `TemplateLimitExceeded`.
"""

from __future__ import annotations

import functools
import json
import time
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import Any, ClassVar

from pcache.prompt.renderers.interface import DEFAULT_DATE
from pcache.prompt.shapes.reasoning import TEMPLATE_REASONING_KEYS

_REASONING = frozenset(TEMPLATE_REASONING_KEYS)

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


TIME_LIMIT_S = 5.0
"""Longest one render may run (real templates render in milliseconds)."""
MAX_OUTPUT_CHARS = 64 * 2**20
"""Largest output, or string built inside, of one render (64 Mi characters)."""
MAX_INTEGER_BITS = 1 << 16
_CHECK_EVERY = 64  # steps between two looks at the clock


class TemplateLimitExceeded(Exception):
    """A render ran past `TIME_LIMIT_S` or built more than `MAX_OUTPUT_CHARS` characters."""


class _Budget:
    """What one render may still spend."""

    __slots__ = ("deadline", "steps")

    def __init__(self) -> None:
        self.deadline = time.monotonic() + TIME_LIMIT_S
        self.steps = 0


_BUDGET: ContextVar[_Budget | None] = ContextVar("template_budget", default=None)


def _step() -> None:
    budget = _BUDGET.get()
    if budget is None:  # outside a render: constant folding while compiling
        return
    budget.steps += 1
    if budget.steps % _CHECK_EVERY == 0 and time.monotonic() > budget.deadline:
        raise TemplateLimitExceeded(f"the chat template ran longer than {TIME_LIMIT_S:g} s")


def _too_long(size: int) -> TemplateLimitExceeded:
    return TemplateLimitExceeded(
        f"the chat template built {size:,} characters, more than {MAX_OUTPUT_CHARS:,}"
    )


def _check_arguments(args: tuple, kwargs: dict) -> None:
    """Refuse a call whose integer argument exceeds the output bound (a width or a count
    that large would build a string past it)."""
    for value in (*args, *kwargs.values()):
        if type(value) is int and value > MAX_OUTPUT_CHARS:
            raise _too_long(value)


def _checked(value: Any) -> Any:
    if isinstance(value, str | list | tuple) and len(value) > MAX_OUTPUT_CHARS:
        raise _too_long(len(value))
    return value


class _Budgeted:
    """An iterable that spends one step per item (every `for` loop of a template)."""

    __slots__ = ("iterable",)

    def __init__(self, iterable: Any) -> None:
        self.iterable = iterable

    def __iter__(self):
        for item in self.iterable:
            _step()
            yield item

    def __len__(self) -> int:
        return len(self.iterable)  # TypeError when it has none: the loop counts it then


def _sequence_product_size(left: Any, right: Any) -> int | None:
    if isinstance(left, str | list | tuple) and isinstance(right, int):
        return len(left) * right
    if isinstance(right, str | list | tuple) and isinstance(left, int):
        return len(right) * left
    return None


def _check_binop(operator: str, left: Any, right: Any) -> None:
    """Refuse, before computing it, a `*`, `+` or `**` whose result would be too big."""
    integers = type(left) is int and type(right) is int
    if operator == "*":
        size = _sequence_product_size(left, right)
        if size is not None and size > MAX_OUTPUT_CHARS:
            raise _too_long(size)
        if integers and left.bit_length() + right.bit_length() > MAX_INTEGER_BITS:
            raise TemplateLimitExceeded("the chat template computed a too large number")
    elif operator == "+" and isinstance(left, str | list | tuple):
        if isinstance(right, str | list | tuple) and len(left) + len(right) > MAX_OUTPUT_CHARS:
            raise _too_long(len(left) + len(right))
    elif operator == "**" and integers and abs(left) > 1 and right > 0:  # noqa: SIM102
        if right * left.bit_length() > MAX_INTEGER_BITS:
            raise TemplateLimitExceeded("the chat template computed a too large number")


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


BUDGET_FILTER = "pcache_budgeted"


@functools.cache
def _bounded_environment_class():
    """`ImmutableSandboxedEnvironment` whose renders are bounded in time and size."""
    import jinja2.nodes
    from jinja2.compiler import CodeGenerator
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class BoundedCodeGenerator(CodeGenerator):
        """Compiles every `~` through a size check."""

        def visit_Concat(self, node, frame):
            self.write("environment.bounded_join((")
            for argument in node.nodes:
                self.visit(argument, frame)
                self.write(", ")
            self.write("))")

    class BoundedEnvironment(ImmutableSandboxedEnvironment):
        code_generator_class = BoundedCodeGenerator
        intercepted_binops = frozenset({"*", "+", "**", "%"})

        def _parse(self, source, name, filename):
            """The template's syntax tree with every `for` iterating over `_Budgeted(...)`."""
            tree = super()._parse(source, name, filename)
            for loop in list(tree.find_all(jinja2.nodes.For)):
                budgeted = jinja2.nodes.Filter(loop.iter, BUDGET_FILTER, [], [], None, None)
                loop.iter = budgeted.set_lineno(loop.lineno)
            return tree

        def call_binop(self, context, operator, left, right):
            _step()
            _check_binop(operator, left, right)
            return _checked(super().call_binop(context, operator, left, right))

        def call(__self, __context, __obj, *args, **kwargs):
            _step()
            _check_arguments(args, kwargs)
            return _checked(
                ImmutableSandboxedEnvironment.call(__self, __context, __obj, *args, **kwargs)
            )

        def concat(self, pieces) -> str:
            """Every render's output (and each macro's): counted, and the clock started."""
            token = _BUDGET.set(_Budget()) if _BUDGET.get() is None else None
            try:
                parts, size = [], 0
                for piece in pieces:
                    _step()
                    size += len(piece)
                    if size > MAX_OUTPUT_CHARS:
                        raise _too_long(size)
                    parts.append(piece)
                return "".join(parts)
            finally:
                if token is not None:
                    _BUDGET.reset(token)

        def bounded_join(self, values) -> str:
            return self.concat(map(str, values))

    return BoundedEnvironment


def _size_checked(function):
    """A filter whose string result is size-checked (its jinja pass-arg marker kept)."""

    @functools.wraps(function)
    def checked(*args: Any, **kwargs: Any) -> Any:
        _step()
        _check_arguments(args, kwargs)
        return _checked(function(*args, **kwargs))

    return checked


def make_environment():
    """A fresh sandboxed, bounded environment; render inside `pinned_date(...)`."""
    import jinja2.ext

    environment = _bounded_environment_class()(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_make_generation_extension(), jinja2.ext.loopcontrols],
    )
    environment.filters["tojson"] = _tojson
    for name, function in list(environment.filters.items()):
        environment.filters[name] = _size_checked(function)
    environment.filters[BUDGET_FILTER] = _Budgeted
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
        reasoning = next((message[key] for key in TEMPLATE_REASONING_KEYS if key in message), None)
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        prepared.append(message)
    return prepared
