"""The stage between parsed lines and requests: what one line means in the context of its log.

- An OTLP export (`{"resourceSpans": [...]}`, one per line as the collector's file exporter
  writes them) holds many spans: each model-call span becomes a document of its own (its
  `path` inside the line kept for error columns); other spans (HTTP, tools, agents) are
  skipped.
- A Responses request continuing an earlier response gets that conversation attached
  (`pcache.prompt.shapes.chains`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from pcache.prompt.shapes.chains import ResponseChains

OTLP_KEY = "resourceSpans"


def model_spans(value: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(path, span) for each span of an OTLP export that records a model call."""
    from pcache.prompt.shapes import openinference, otel_spans

    resources = value.get(OTLP_KEY)
    for r, resource in enumerate(resources if isinstance(resources, list) else []):
        scopes = resource.get("scopeSpans") if isinstance(resource, dict) else None
        for s, scope in enumerate(scopes if isinstance(scopes, list) else []):
            spans = scope.get("spans") if isinstance(scope, dict) else None
            for n, span in enumerate(spans if isinstance(spans, list) else []):
                if isinstance(span, dict) and (
                    otel_spans.looks_like(span) or openinference.looks_like(span)
                ):
                    yield f"{OTLP_KEY}[{r}].scopeSpans[{s}].spans[{n}]", span


class DocumentExpander:
    """`expand_documents` one document at a time, for a log read in pieces (`pcache watch`):
    the Responses chains of the log so far are kept between calls."""

    def __init__(self) -> None:
        self.chains = ResponseChains()

    def expand(self, document: Any) -> Iterator[Any]:
        value = getattr(document, "value", None)
        if type(value) is dict:
            if OTLP_KEY in value:
                for path, span in model_spans(value):
                    yield replace(document, value=span, path=path)
                return
            prepared = self.chains.prepare(value)
            if prepared is not value:
                document = replace(document, value=prepared)
        yield document


def expand_documents(documents: Iterator[Any]) -> Iterator[Any]:
    """Documents (and the InputErrors among them) as requests see them."""
    expander = DocumentExpander()
    for document in documents:
        yield from expander.expand(document)


def expand_values(entries: Iterator[Any]) -> Iterator[Any]:
    """`expand_documents` for (line, value) pairs."""
    chains = ResponseChains()
    for entry in entries:
        if type(entry) is tuple and type(entry[1]) is dict:
            line, value = entry
            if OTLP_KEY in value:
                for _, span in model_spans(value):
                    yield line, span
                continue
            prepared = chains.prepare(value)
            if prepared is not value:
                entry = (line, prepared)
        yield entry
