"""Lint a set of request files: stream them, group sessions, run the rules, attribute costs."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pcache.cache.hashing import DEFAULT_BLOCK_SIZE
from pcache.cache.profiles import load_profile
from pcache.errors import InputError, UsageError
from pcache.prompt.json_positions import JsonPositions
from pcache.prompt.loading import Document, iter_documents
from pcache.prompt.render import DEFAULT_TOKENIZER, resolve_renderer
from pcache.prompt.request import Request, request_from_document, request_of
from pcache.prompt.segment_cache import SegmentCachedRenderer
from pcache.prompt.tokenizer import DEFAULT_DATE
from pcache.rules import PARSE_ERROR, REGISTRY
from pcache.rules.base import Diagnostic, Rule, Violation
from pcache.rules.config import LintConfig
from pcache.rules.context import (
    AppState,
    LintContext,
    LintSettings,
    RequestContext,
    SessionHead,
)
from pcache.rules.cost import PrefixIndex, expected_shared, reusable
from pcache.rules.fixes import fix_files
from pcache.rules.selection import Selection
from pcache.rules.sessions import SessionTracker

INPUT_SUFFIXES = (".json", ".jsonl", ".ndjson")
KEEP_RENDERED = 512


@dataclass(frozen=True, slots=True)
class LintOptions:
    tokenizer: str = DEFAULT_TOKENIZER
    profile: str = "vllm"
    block_size: int = DEFAULT_BLOCK_SIZE
    date: str = DEFAULT_DATE
    selection: Selection = field(default_factory=Selection)
    fix: bool = False
    renderer: Any = None
    """A renderer object to use instead of resolving `tokenizer` (libraries, tests)."""


@dataclass(slots=True)
class RuleTotal:
    code: str
    name: str
    count: int = 0
    tokens_reprefilled: int = 0


@dataclass(slots=True)
class LintSummary:
    """Totals of a run. The "if fixed" ratio is an upper bound: every finding assumed fixed."""

    files: int = 0
    requests: int = 0
    sessions: int = 0
    prompt_tokens: int = 0
    reusable_tokens: int = 0
    reusable_tokens_if_fixed: int = 0
    profile: str = ""
    tokenizer: str = ""
    block_size: int = 16
    rules: list[RuleTotal] = field(default_factory=list)
    fixed_files: list[str] = field(default_factory=list)
    stage_seconds: dict[str, float] = field(default_factory=dict)

    @property
    def cacheable_ratio(self) -> float:
        return self.reusable_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def cacheable_ratio_if_fixed(self) -> float:
        return self.reusable_tokens_if_fixed / self.prompt_tokens if self.prompt_tokens else 0.0

    def as_dict(self) -> dict[str, object]:
        return {
            "files": self.files,
            "requests": self.requests,
            "sessions": self.sessions,
            "prompt_tokens": self.prompt_tokens,
            "reusable_tokens": self.reusable_tokens,
            "reusable_tokens_if_fixed_upper_bound": self.reusable_tokens_if_fixed,
            "cacheable_ratio": round(self.cacheable_ratio, 6),
            "cacheable_ratio_if_fixed_upper_bound": round(self.cacheable_ratio_if_fixed, 6),
            "profile": self.profile,
            "tokenizer": self.tokenizer,
            "block_size": self.block_size,
            "rules": [
                {
                    "code": t.code,
                    "name": t.name,
                    "count": t.count,
                    "tokens_reprefilled": t.tokens_reprefilled,
                }
                for t in self.rules
            ],
            "fixed_files": self.fixed_files,
        }


@dataclass(slots=True)
class LintReport:
    diagnostics: list[Diagnostic]
    summary: LintSummary


def expand_paths(paths: list[str]) -> list[str]:
    """Files to lint: files as given, directories searched for .json/.jsonl/.ndjson files."""
    if not paths:
        raise UsageError("no input: pass files, directories, or - for stdin")
    files: list[str] = []
    for path in paths:
        if path == "-":
            files.append(path)
            continue
        location = Path(path)
        if location.is_dir():
            found = sorted(
                str(child)
                for child in location.rglob("*")
                if child.suffix in INPUT_SUFFIXES
                and child.is_file()
                and not any(part.startswith(".") for part in child.relative_to(location).parts)
            )
            if not found:
                suffixes = ", ".join(INPUT_SUFFIXES)
                raise InputError(path, f"no request files ({suffixes}) in this directory")
            files.extend(found)
        elif location.exists():
            files.append(path)
        else:
            raise InputError(path, "no such file or directory")
    return files


def _iter_file(path: str) -> Iterator[Request | InputError]:
    try:
        for document in iter_documents(path, skip_errors=True):
            if isinstance(document, InputError):
                yield document
                continue
            assert isinstance(document, Document)
            try:
                yield request_of(document)
            except InputError as failure:
                yield failure
    except InputError as failure:
        yield failure


class _Run:
    """State of one pass over the inputs."""

    def __init__(self, options: LintOptions, config: LintConfig, progress):
        renderer = SegmentCachedRenderer(options.renderer or resolve_renderer(options.tokenizer))
        profile = load_profile(options.profile)
        self.settings = LintSettings(renderer, profile, options.block_size, options.date)
        self.renderer = renderer
        self.config = config
        self.progress = progress
        self.modules = [m for m in REGISTRY if options.selection.is_selected(m.RULE.code)]
        self.report_parse_errors = options.selection.is_selected(PARSE_ERROR.code)
        self.tracker = SessionTracker()
        self.app = AppState()
        self.index = PrefixIndex(options.block_size)
        self.rendered_contexts: deque[RequestContext] = deque()
        self.diagnostics: list[Diagnostic] = []
        self.summary = LintSummary(
            profile=profile.name, tokenizer=renderer.name, block_size=options.block_size
        )
        self.totals: dict[str, RuleTotal] = {}
        self.seconds = {"read": 0.0, "render": 0.0, "rules": 0.0, "cost": 0.0}
        self.ignored: tuple[str, ...] = ()
        self.positions: tuple[tuple[str, int | None], JsonPositions | None] | None = None

    def lint_file(self, path: str) -> None:
        self.summary.files += 1
        self.ignored = tuple(s.upper() for s in self.config.ignored_for(path))
        started = time.perf_counter()
        for item in _iter_file(path):
            self.seconds["read"] += time.perf_counter() - started
            if isinstance(item, InputError):
                self._parse_error(item)
            else:
                self.lint_request_or_report(item)
            if self.progress is not None:
                self.progress(1)
            started = time.perf_counter()

    def _keep(self, code: str) -> bool:
        return not any(code.startswith(selector) for selector in self.ignored)

    def _parse_error(self, failure: InputError) -> None:
        if not self.report_parse_errors or not self._keep(PARSE_ERROR.code):
            return
        self.diagnostics.append(
            Diagnostic(
                code=PARSE_ERROR.code,
                name=PARSE_ERROR.name,
                severity="error",
                file=failure.source,
                request=failure.source,
                line=failure.line or 1,
                column=failure.column or 1,
                json_path="",
                token_position=None,
                tokens_reprefilled=0,
                message=failure.message,
            )
        )
        self._total(PARSE_ERROR, 0)

    def lint_request_or_report(self, request: Request) -> None:
        """Lint one request; one that cannot be rendered is a PC000 finding on its line."""
        try:
            self.lint_request(request)
        except InputError as failure:
            self._parse_error(failure)

    def lint_request(self, request: Request) -> None:
        assignment = self.tracker.assign(request)
        current = RequestContext(request, self.settings, assignment.session)
        previous: RequestContext | None = assignment.previous
        is_head = previous is None
        started = time.perf_counter()
        token_ids = current.token_ids
        self.seconds["render"] += time.perf_counter() - started
        self._remember_rendered(current)

        started = time.perf_counter()
        context = LintContext(current, previous, self.app, is_head)
        found: list[tuple[Rule, Violation]] = []
        for module in self.modules:
            found.extend((module.RULE, violation) for violation in module.check(context))
        self.seconds["rules"] += time.perf_counter() - started

        started = time.perf_counter()
        self._cost(context, token_ids, found)
        self.seconds["cost"] += time.perf_counter() - started
        if is_head:
            self.summary.sessions += 1
            self.app.add_head(SessionHead(assignment.session, current.identity, current))
        self.tracker.record(assignment.session, request, current)

    def _remember_rendered(self, current: RequestContext) -> None:
        self.rendered_contexts.append(current)
        while len(self.rendered_contexts) > KEEP_RENDERED:
            self.rendered_contexts.popleft().release()

    def _cost(self, context: LintContext, token_ids: list[int], found) -> None:
        current = context.current
        profile, size = self.settings.profile, self.settings.block_size
        num_tokens = len(token_ids)
        common = self.index.observe(token_ids)
        as_is = reusable(profile, common, num_tokens, size)
        fixed = as_is
        kept = [(rule, v) for rule, v in found if self._keep(rule.code)]
        if kept:
            expected = expected_shared(context)
            expected_reuse = reusable(profile, expected, num_tokens, size)
            fixed = max(as_is, expected_reuse)
            for rule, violation in kept:
                position = self._position(current, violation)
                lost = 0
                if violation.tokens_reprefilled is not None:
                    lost = violation.tokens_reprefilled
                elif position is not None:
                    lost = expected_reuse - reusable(
                        profile, min(position, expected), num_tokens, size
                    )
                self._report(rule, violation, current, position, max(0, lost))
        self.summary.requests += 1
        self.summary.prompt_tokens += num_tokens
        self.summary.reusable_tokens += as_is
        self.summary.reusable_tokens_if_fixed += fixed

    def _position(self, current: RequestContext, violation: Violation) -> int | None:
        if violation.token_position is not None:
            return violation.token_position
        if not violation.json_path or not current.is_chat:
            return None
        rendered = current.rendered
        path = violation.json_path
        for span in rendered.spans:
            if span.path == path or span.path.startswith((path + ".", path + "[")):
                return current.token_of_char(min(span.start + violation.offset, span.end - 1))
        best = None
        for span in rendered.spans:
            if path.startswith((span.path + ".", span.path + "[")) and best is None:
                best = span
        return current.token_of_char(best.start) if best else None

    def _locate(self, request: Request, json_path: str) -> tuple[int, int]:
        """Line and column of `json_path` in a .json request file (else the request's line)."""
        line = request.line or 1
        if not request.source.endswith(".json"):
            return line, 1
        key = (request.source, request.line)
        if self.positions is None or self.positions[0] != key:
            self.positions = (key, _positions_of(request))
        positions = self.positions[1]
        if positions is None:
            return line, 1
        found_line, column = positions.locate(json_path)
        return (found_line, column) if request.line is None else (line, column)

    def _report(self, rule: Rule, violation: Violation, current, position, lost: int) -> None:
        request = current.request
        line, column = self._locate(request, violation.json_path)
        self.diagnostics.append(
            Diagnostic(
                code=rule.code,
                name=rule.name,
                severity=violation.severity or rule.severity,
                file=request.source,
                request=request.label,
                line=line,
                column=column,
                json_path=violation.json_path,
                token_position=position,
                tokens_reprefilled=lost,
                message=violation.message,
                fix_title=violation.fix_title,
                fixable=violation.fixable and request.source.endswith(".json"),
            )
        )
        self._total(rule, lost)

    def _total(self, rule: Rule, lost: int) -> None:
        total = self.totals.setdefault(rule.code, RuleTotal(rule.code, rule.name))
        total.count += 1
        total.tokens_reprefilled += lost

    def finish(self) -> LintReport:
        self.summary.rules = [self.totals[code] for code in sorted(self.totals)]
        self.summary.stage_seconds = {k: round(v, 3) for k, v in self.seconds.items()}
        self.diagnostics.sort(key=Diagnostic.sort_key)
        return LintReport(self.diagnostics, self.summary)


def _positions_of(request: Request) -> JsonPositions | None:
    """The position index of a .json request file (of its line, for one-request-per-line
    files); None when the file cannot be read again."""
    try:
        with open(request.source, encoding="utf-8-sig") as handle:
            if request.line is None:
                return JsonPositions(handle.read())
            for number, text in enumerate(handle, 1):
                if number == request.line:
                    return JsonPositions(text)
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        return None
    return None


def lint_paths(
    paths: list[str],
    options: LintOptions,
    config: LintConfig | None = None,
    progress: Callable[[int], None] | None = None,
) -> LintReport:
    """Lint every request under `paths`; with `options.fix`, fix request files first."""
    config = config or LintConfig()
    files = expand_paths(paths)
    fixed_files: list[str] = []
    if options.fix:
        first = _lint_files(files, options, config, None)
        fixable = sorted({d.file for d in first.diagnostics if d.fixable})
        fixed_files = fix_files(fixable)
    report = _lint_files(files, options, config, progress)
    report.summary.fixed_files = fixed_files
    return report


def _lint_files(files, options, config, progress) -> LintReport:
    run = _Run(options, config, progress)
    for path in files:
        run.lint_file(path)
    return run.finish()


def lint_values(values: list[object], options: LintOptions, source: str = "<memory>") -> LintReport:
    """Lint parsed request bodies in order, as lines of one JSONL source (tests, libraries)."""
    run = _Run(options, LintConfig(), None)
    run.summary.files = 1
    for line, value in enumerate(values, 1):
        try:
            request = request_from_document(value, source, line)
        except InputError as failure:
            run._parse_error(failure)
            continue
        run.lint_request_or_report(request)
    return run.finish()
