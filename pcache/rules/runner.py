"""Lint a set of request files: stream them, group sessions, run the rules, attribute costs."""

from __future__ import annotations

import dataclasses
import time
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from pcache.cache.prices import Price, PriceBook
from pcache.cache.profiles import load_profile, longest_ttl_seconds
from pcache.divergence.sessions import SessionTracker
from pcache.errors import InputError, OptionError, UsageError
from pcache.pipeline import RENDER_CHUNK, RenderStage, Settings, WithSettings
from pcache.prompt.reading.json_positions import JsonPositions
from pcache.prompt.reading.loading import Document, iter_documents
from pcache.prompt.reading.tables import (
    NEEDS_PYARROW,
    TABLE_SUFFIXES,
    is_table,
    pyarrow_available,
    split_column,
    with_column,
)
from pcache.prompt.renderers.render import DEFAULT_TOKENIZER, resolve_renderer
from pcache.prompt.shapes.request import Request, request_from_document, request_of
from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer
from pcache.rules import PARSE_ERROR, REGISTRY, RULE_FOR_CAUSE, RULES, token_worker
from pcache.rules.base import Diagnostic, Rule, Violation
from pcache.rules.config import LintConfig
from pcache.rules.context import (
    AppState,
    LintContext,
    LintSettings,
    RequestContext,
    SessionHead,
    is_chat,
)
from pcache.rules.cost import Costs
from pcache.rules.defects import Finder
from pcache.rules.fix_plan import Fix, FixPlan
from pcache.rules.fixed_replay import FixedLog, written_body
from pcache.rules.fixed_writer import FixedWriter
from pcache.rules.fixes import fix_files
from pcache.rules.groups import NONE, Groups
from pcache.rules.money import PRICE_KEY, group_money, price_rows
from pcache.rules.patterns import short
from pcache.rules.selection import Selection
from pcache.rules.summary import LintReport, LintSummary, RuleTotal
from pcache.text.prefix import common_prefix_length
from pcache.text.redaction import redacting

INPUT_SUFFIXES = (".json", ".jsonl", ".ndjson")
KEEP_RENDERED = 512
RULE_CODES_WITH_CAUSES = frozenset(
    module.RULE.code for module in REGISTRY if getattr(module, "CAUSES", ())
)
"""Rules that report divergences: their check's finding on a request becomes the
divergence's when a fix changes that request."""
CONSTANT_VALUE_CODES = frozenset({"PC101", "PC103"})
"""Rules whose check reports a value that costs nothing while it never changes."""
KEEP_CHECK_FINDINGS = 100_000
"""Checks' findings of divergence rules kept for the fixed log's replay to charge (later ones
are charged as findings of their own)."""
KEEP_FINDINGS = 10_000
"""Findings listed at most; later ones are counted in the rule totals and the summary
(`findings_not_listed`), so a log with a finding in every conversation keeps bounded memory."""


@dataclass(frozen=True, slots=True)
class LintOptions(WithSettings):
    settings: Settings = field(default_factory=Settings)
    """Tokenizer (and template), block size, date and profile; hashing is not used by lint."""
    selection: Selection = field(default_factory=Selection)
    fix: bool = False
    column: str | None = None
    """The request column of table inputs (`--column`; `FILE#COLUMN` names it per file)."""
    renderer: Any = None
    """A renderer object to use instead of resolving `settings.tokenizer` (libraries, tests)."""
    template_chosen: bool | None = None
    """Whether the template is the one the user's model uses (rules about the template speak
    only then); None: when the tokenizer is not the default or `renderer` is given."""
    write_fixed: str | None = None
    """Where to write the fixed log (`--write-fixed`): every request, in order, as the fixed
    log that the findings' tokens were replayed from sends it."""
    redact: bool = False
    """No string of a request in the findings: values quoted as their shapes (`--redact`)."""
    group_by: tuple[str, ...] = ()
    """Keys the summary's totals are also split by (`--group-by`: `pcache.rules.groups`)."""
    price: str | None = None
    """The model whose family prices every request (`--price`), whatever its model."""
    prices: tuple[Price, ...] = ()
    """Prices of models the data file lacks (`[tool.pcache.prices]`; `Price.family`: the
    model's name)."""
    observer: Callable[[Request | InputError, list[int] | None], None] | None = None
    """Told of every request linted, with its token ids, and of every line or request that
    could not be read or rendered (with None), in input order: a consumer of the same log
    (`pcache report`) reuses this one pass."""

    @property
    def speaks_for_template(self) -> bool:
        if self.template_chosen is not None:
            return self.template_chosen
        return self.renderer is not None or self.tokenizer != DEFAULT_TOKENIZER


@dataclass(slots=True)
class Inputs:
    """The files a set of paths names, and the tables a directory search left out."""

    files: list[str] = field(default_factory=list)
    skipped_tables: list[str] = field(default_factory=list)
    """Tables found in directories while pyarrow is not installed."""


def expand_paths(paths: list[str], column: str | None = None) -> list[str]:
    """Files to lint: files as given, directories searched for request files."""
    return find_inputs(paths, column).files


def request_suffixes() -> tuple[str, ...]:
    """The file suffixes a directory search takes: request logs, and tables with pyarrow."""
    return INPUT_SUFFIXES + (TABLE_SUFFIXES if pyarrow_available() else ())


def find_inputs(paths: list[str], column: str | None = None) -> Inputs:
    """Files as given, directories searched for .json/.jsonl/.ndjson files and, with pyarrow
    installed, .parquet/.pq/.csv tables; `column` (`--column`) names the request column of
    every table (`with_column`)."""
    if not paths:
        raise UsageError("no input: pass files, directories, or - for stdin")
    inputs = Inputs()
    suffixes = request_suffixes()
    for path in paths:
        if path == "-":
            inputs.files.append(path)
            continue
        location = Path(path)
        if location.is_dir():
            found, tables = [], []
            for child in sorted(location.rglob("*")):
                if any(part.startswith(".") for part in child.relative_to(location).parts):
                    continue
                suffix = child.suffix.lower()
                if suffix in suffixes and child.is_file():
                    found.append(with_column(str(child), column))
                elif suffix in TABLE_SUFFIXES and child.is_file():
                    tables.append(str(child))
            if not found:
                message = f"no request files ({', '.join(suffixes)}) in this directory"
                if tables:
                    message += f"; its {len(tables)} table(s): {NEEDS_PYARROW}"
                raise InputError(path, message)
            inputs.files.extend(found)
            inputs.skipped_tables.extend(tables)
        elif location.exists() or Path(split_column(path)[0]).exists():  # table.parquet#column
            inputs.files.append(with_column(path, column))
        else:
            raise InputError(path, "no such file or directory")
    if column is not None and not any(is_table(file) for file in inputs.files):
        raise OptionError(
            "column", f"{column}: no table input (.parquet, .pq, .csv) to read it from"
        )
    return inputs


def batched(items, size: int):
    """Lists of `size` items in order (the last one shorter)."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


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


SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


class _Run:
    """State of one pass over the inputs."""

    def __init__(self, options: LintOptions, config: LintConfig, progress):
        renderer = SegmentCachedRenderer(options.renderer or resolve_renderer(options.tokenizer))
        ahead = options.executor == "local" or options.renderer is not None  # no remote pieces
        self.jobs = options.settings.job_count
        self.forks = options.executor == "local" and options.renderer is None
        """Whether a large file's token ids may come from a forked child (a renderer given by
        the caller is theirs, and with Ray the tasks encode)."""
        self.stage = RenderStage(
            renderer, options.settings.render_options(), options.jobs, ahead=ahead
        )
        profile = load_profile(options.profile)
        self.settings = LintSettings(renderer, profile, options.block_size, options.date)
        self.renderer = renderer
        self.options_tokenizer = options.tokenizer
        self.config = config
        self.progress = progress
        selection = options.selection
        self.modules = [m for m in REGISTRY if selection.is_selected(m.RULE.code)]
        self.checks = [m for m in self.modules if hasattr(m, "check")]
        self.selected = {m.RULE.code for m in self.modules}
        self.explicit = {m.RULE.code for m in self.modules if selection.is_explicit(m.RULE.code)}
        self.report_parse_errors = selection.is_selected(PARSE_ERROR.code)
        self.template_location = options.tokenizer if options.renderer is None else renderer.name
        self.speaks_for_template = options.speaks_for_template
        lifetime = longest_ttl_seconds(profile.name)
        self.tracker = SessionTracker(lifetime_ms=None if lifetime is None else lifetime * 1000.0)
        self.app = AppState()
        self.costs = Costs(profile, options.block_size)
        self.plan = FixPlan()
        self.finder = Finder(self.plan, RULE_FOR_CAUSE, self._reports)
        self.lost = array("q")
        """What each request re-prefills as is (by number)."""
        self.holders = array("q")
        """The request holding each request's longest cached prefix as is (-1: none)."""
        self.predecessors = array("q")
        """Each request's session predecessor (its number; -1: none)."""
        self.needed = array("q")
        """How many later requests repeat each request's fixed form."""
        self.sources: list[Callable[[], Iterator[Request]]] = []
        """The inputs, read again for the fixed log's replay."""
        self.stdin: list | None = None
        """What stdin held (it cannot be read twice)."""
        self.write_fixed = options.write_fixed
        if self.write_fixed is not None:
            FixedWriter.check(self.write_fixed)  # before the pass, not after it
        self.check_findings: dict[tuple[int, str], Diagnostic] = {}
        """The checks' findings of divergence rules, by (request number, rule code)."""
        self.fixed_findings: dict[tuple[int, str], Diagnostic] = {}
        self.first_changes: dict[Fix, tuple] = {}
        """Where each fix first changed a request of the fixed log."""
        self.debts: dict[str, int] = {}
        """Tokens the fixed log costs more than the log in some requests, by rule."""
        self.rendered_contexts: deque[RequestContext] = deque()
        """The requests linted last, whose renders are kept (`KEEP_RENDERED`)."""
        self.kept_renders: set[int] = set()
        """The ids of `rendered_contexts` (a membership test without a scan)."""
        self.diagnostics: list[Diagnostic] = []
        self.groups: dict[object, Diagnostic] = {}
        self.summary = LintSummary(
            profile=profile.name, tokenizer=renderer.name, block_size=options.block_size
        )
        self.totals: dict[str, RuleTotal] = {}
        self.seconds = {"read": 0.0, "render": 0.0, "rules": 0.0, "cost": 0.0}
        self.ignored: tuple[str, ...] = ()
        self.positions: tuple[tuple[str, int | None], JsonPositions | None] | None = None
        self.observer = options.observer
        self.executor = None
        """Where the text of JSONL logs is encoded, when not here (`--executor`)."""
        if options.executor != "local" and options.renderer is None:
            from pcache.executors import executor_of

            self.executor = executor_of(options.executor, options.settings.ray_address)
        self.failing_not_listed = 0
        self.request_groups = Groups(options.group_by, config.apps) if options.group_by else None
        """Each request's group and each group's totals (`--group-by`)."""
        self.prices = PriceBook({p.family: p for p in options.prices}, options.price)
        self.priced = Groups(options.group_by, config.apps, extra_keys=(PRICE_KEY,))
        """The same totals by group and price family: what money is made of."""
        self.groupings = [g for g in (self.request_groups, self.priced) if g is not None]

    def forget_after(self, lifetime_ms: float) -> None:
        """Forget prefixes and close sessions no request used for `lifetime_ms` (in place of
        the profile's longest lifetime; before the first request)."""
        assert self.costs.num_settled == 0 and lifetime_ms > 0
        self.costs.lifetime_ms = self.costs.index.lifetime_ms = lifetime_ms
        self.tracker.lifetime_ms = lifetime_ms

    def _items(self, path: str):
        """The file's requests and errors (stdin is read once and kept for the second pass)."""
        if path != "-":
            return _iter_file(path)
        if self.stdin is None:
            self.stdin = list(_iter_file(path))
        return iter(self.stdin)

    def lint_file(self, path: str) -> None:
        from pcache.rules.remote_pieces import remote_pieces

        self.sources.append(
            lambda: (item for item in self._items(path) if isinstance(item, Request))
        )

        remote = remote_pieces(
            self.executor, self.renderer, self.options_tokenizer, self.stage.options, path
        )
        try:
            self._lint_file(path, remote)
        finally:
            if remote is not None:
                remote.close()

    def _lint_file(self, path: str, remote) -> None:
        """Lint the file's requests chunk by chunk; with a render stage that runs ahead, each
        chunk is read and rendered, and its new text sent to be encoded, before the chunk
        before it is linted."""
        self.summary.files += 1
        self.ignored = tuple(s.upper() for s in self.config.ignored_for(path))
        forks = remote is None and self.forks and token_worker.wanted(path, self.jobs)
        if forks and self._lint_file_forked(path):
            return
        ahead = self.stage.ahead and remote is None
        waiting = None
        started = time.perf_counter()
        try:
            for chunk in batched(self._items(path), RENDER_CHUNK):
                self.seconds["read"] += time.perf_counter() - started
                started = time.perf_counter()
                chats = [item for item in chunk if isinstance(item, Request) and is_chat(item)]
                if remote is not None and chats:
                    remote.reach(chats[-1].line)
                prepared = (chunk, chats, self.stage.start(chats, background=ahead))
                self.seconds["render"] += time.perf_counter() - started
                if waiting is not None:
                    self._lint_chunk(*waiting)
                waiting = prepared
                if not ahead:
                    self._lint_chunk(*waiting)
                    waiting = None
                started = time.perf_counter()
            if waiting is not None:
                self._lint_chunk(*waiting)
        finally:
            self.stage.close()

    def _lint_file_forked(self, path: str) -> bool:
        """Lint the file's requests with their token ids from a forked child
        (`pcache.rules.token_worker`), chunk by chunk as the child sends them; False (nothing
        done) when no child could be forked."""

        def chunks():
            return batched(self._items(path), RENDER_CHUNK)

        worker = token_worker.TokenWorker.start(chunks, self.stage, self.jobs)
        if worker is None:
            return False
        try:
            started = time.perf_counter()
            for chunk in chunks():
                begun = time.perf_counter()
                self.seconds["read"] += begun - started
                ids = worker.ids_of(chunk)
                self.seconds["render"] += time.perf_counter() - begun
                for item, token_ids in zip(chunk, ids, strict=True):
                    if isinstance(item, InputError):
                        self._parse_error(item)
                    else:
                        self.lint_request_or_report(item, token_ids=token_ids)
                    if self.progress is not None:
                        self.progress(1)
                started = time.perf_counter()
        finally:
            worker.close()
            self.renderer.hits += worker.hits
            self.renderer.misses += worker.misses
        return True

    def _lint_chunk(self, chunk: list, chats: list[Request], started: Any) -> None:
        """Lint a chunk of read items in order (its chat requests rendered by `stage.start`)."""
        begun = time.perf_counter()
        texts = dict(zip(map(id, chats), self.stage.finish(started), strict=True))
        self.seconds["render"] += time.perf_counter() - begun
        for item in chunk:
            if isinstance(item, InputError):
                self._parse_error(item)
            else:
                self.lint_request_or_report(item, texts.get(id(item)))
            if self.progress is not None:
                self.progress(1)

    def _keep(self, code: str) -> bool:
        return not any(code.startswith(selector) for selector in self.ignored)

    def lint_item(self, item: Request | InputError) -> None:
        """Lint one item read from the input (a line that could not be read is reported)."""
        if isinstance(item, InputError):
            self._parse_error(item)
        else:
            self.lint_request_or_report(item)

    def _parse_error(self, failure: InputError) -> None:
        if self.observer is not None:
            self.observer(failure, None)
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
        self._total(PARSE_ERROR).count += 1

    def lint_request_or_report(self, request: Request, text=None, token_ids=None) -> None:
        """Lint one request (`text`: its render, when the render stage made it; `token_ids`:
        its ids, when a forked child computed them); one that cannot be rendered is a PC000
        finding on its line."""
        try:
            self.lint_request(request, text, token_ids)
        except InputError as failure:
            self._parse_error(failure)

    def lint_request(self, request: Request, text=None, token_ids=None) -> None:
        self.tracker.close_idle(request.timestamp)
        assignment = self.tracker.assign(request)
        current = RequestContext(request, self.settings, assignment.session, text, token_ids)
        previous: RequestContext | None = assignment.previous
        is_head = previous is None
        started = time.perf_counter()
        _ = current.token_ids  # rendered and tokenized here, timed as such
        self.seconds["render"] += time.perf_counter() - started
        if self.observer is not None:
            self.observer(request, current.token_ids)
        self._remember_rendered(current)

        started = time.perf_counter()
        found = self.costs.match(current)
        self.seconds["cost"] += time.perf_counter() - started

        started = time.perf_counter()
        context = LintContext(current, previous, self.app, is_head, found.length)
        violations: list[tuple[Rule, Violation]] = []
        for module in self.checks:
            for violation in module.check(context):
                violations.append((module.RULE, violation))
        self.seconds["rules"] += time.perf_counter() - started

        started = time.perf_counter()
        self._cost(context, previous, violations, found)
        self.seconds["cost"] += time.perf_counter() - started
        if is_head:
            self.summary.sessions += 1
            self.app.add_head(SessionHead(assignment.session, current.identity, current))
        self.tracker.record(assignment.session, request, current)

    def _remember_rendered(self, current: RequestContext) -> None:
        self.rendered_contexts.append(current)
        self.kept_renders.add(id(current))
        while len(self.rendered_contexts) > KEEP_RENDERED:
            oldest = self.rendered_contexts.popleft()
            self.kept_renders.discard(id(oldest))
            oldest.release()

    def _wanted(self, rule: Rule, violation: Violation) -> bool:
        if not self._keep(rule.code):
            return False
        if violation.hint and rule.code not in self.explicit:
            return False  # a suspicion without an observed change: only when asked for
        return not violation.at_template or self.speaks_for_template

    def _reports(self, rule: Rule) -> bool:
        """Whether a defect of this rule is reported (and fixed in the fixed log)."""
        if rule.code not in self.selected or not self._keep(rule.code):
            return False
        return rule is not RULE_FOR_CAUSE["template"] or self.speaks_for_template

    def _cost(self, context: LintContext, previous, violations, found) -> None:
        """Record the request's defects against the requests it could have reused
        (`pcache.rules.defects`), report the checks' findings, and add up what it re-prefills
        as is; what the fixes save is charged after the pass (`_replay_fixed`)."""
        current = context.current
        number = self.costs.num_settled
        current.number = number
        wanted = [(rule, v) for rule, v in violations if self._wanted(rule, v)]
        rounding = any(v.claims == "rounding" and not v.hint for _, v in wanted)
        self._find_defects(current, number, previous, found)
        settled = self.costs.settle(current, found)
        if self.request_groups is not None:
            self.request_groups.add_request(current.request, len(current.token_ids), settled.reused)
        price = self.prices.of(current.request.model)
        family = (price.family if price is not None else NONE,)
        self.priced.add_request(current.request, len(current.token_ids), settled.reused, family)
        self.lost.append(settled.lost)
        self.needed.append(0)
        self.holders.append(found.holder if found.holder is not None else -1)
        previous_number = previous.number if previous is not None else -1
        self.predecessors.append(previous_number)
        for used in {previous_number, *(r.partner for r in self.plan.restores.get(number, ()))}:
            if used >= 0:
                self.needed[used] += 1
        rounded = 0 if settled.first or not rounding else settled.granular
        for rule, violation in wanted:
            position = self._position(current, violation)
            diagnostic = self._report(rule, violation, current, position)
            free = rule.code in RULE_CODES_WITH_CAUSES and not violation.at_template
            if free and len(self.check_findings) < KEEP_CHECK_FINDINGS:
                self.check_findings[(number, rule.code)] = diagnostic
            if violation.claims == "rounding" and not violation.hint and rounded:
                diagnostic.tokens_reprefilled += rounded
                self.totals[diagnostic.code].tokens_reprefilled += rounded
                for groups in self.groupings:
                    groups.charge(number, diagnostic.code, rounded)
                rounded = 0
        summary = self.summary
        if settled.first:
            summary.unattributed["first_request"] += settled.lost
        else:
            granular = settled.granular if not rounding else 0
            summary.unattributed["partial_blocks"] += granular
        summary.requests += 1
        summary.prompt_tokens += len(current.token_ids)
        summary.reusable_tokens += settled.reused
        summary.observed.add(
            current.request,
            len(current.token_ids),
            settled.reused,
            self.costs.models.of(current.request.model),
            summary.block_size,
            previous.request if previous is not None else None,
        )
        self.plan.count(current.request.tools)

    def _find_defects(self, current: RequestContext, number: int, previous, found) -> None:
        """Compare the request with its session's previous request and with the holder of its
        longest cached prefix (`pcache.rules.defects`)."""
        candidates = []
        if previous is not None:
            candidates.append((previous, previous.number, True))
        holder = self.costs.holder(found)
        if holder is not None and holder.context is not previous:
            same = holder.session == current.session
            candidates.append((holder.context, found.holder, same))
        for earlier, earlier_number, conversation in candidates:
            was_rendered = earlier.is_rendered
            self.finder.find(current, number, earlier, earlier_number, conversation)
            if not was_rendered and id(earlier) not in self.kept_renders:
                earlier.release()

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

    def _report(self, rule: Rule, violation: Violation, current, position) -> Diagnostic:
        """The finding as reported; a violation of a group already reported joins it."""
        severity = violation.severity or rule.severity
        grouped = self.groups.get(violation.group) if violation.group is not None else None
        if grouped is not None:
            if SEVERITY_RANK[severity] > SEVERITY_RANK[grouped.severity]:
                grouped.severity, grouped.message = severity, violation.message
            return grouped
        request = current.request
        if violation.at_template:
            file, label, line, column = self.template_location, "(chat template)", 1, 1
        else:
            file, label = request.source, request.label
            line, column = self._locate(request, violation.json_path)
        diagnostic = Diagnostic(
            code=rule.code,
            name=rule.name,
            severity=severity,
            file=file,
            request=label,
            line=line,
            column=column,
            json_path=violation.json_path,
            token_position=position,
            tokens_reprefilled=0,
            message=violation.message,
            fix_title=violation.fix_title,
            fixable=violation.fixable and request.source.endswith(".json"),
        )
        self._total(rule).count += 1
        if self.request_groups is not None:
            diagnostic.extra["group"] = self.request_groups.group_of(request)
            self.request_groups.count(request, rule.code)
        if len(self.diagnostics) >= KEEP_FINDINGS:
            diagnostic.listed = False  # counted in the totals, not kept
            self.summary.findings_not_listed += 1
            if diagnostic.severity != "info" or diagnostic.code in self.explicit:
                self.failing_not_listed += 1
            return diagnostic
        self.diagnostics.append(diagnostic)
        if violation.group is not None:
            self.groups[violation.group] = diagnostic
        return diagnostic

    def _total(self, rule: Rule) -> RuleTotal:
        return self.totals.setdefault(rule.code, RuleTotal(rule.code, rule.name))

    def _settle_debts(self) -> None:
        """What the fixed log costs more in some requests (block boundaries moved by a fix) is
        taken off the rule's findings, largest first: a rule's total is what its fix saves."""
        for code, debt in self.debts.items():
            owed = debt
            findings = sorted(
                (d for d in self.diagnostics if d.code == code and d.tokens_reprefilled),
                key=lambda d: -d.tokens_reprefilled,
            )
            for diagnostic in findings:
                paid = min(debt, diagnostic.tokens_reprefilled)
                diagnostic.tokens_reprefilled -= paid
                self.totals[code].tokens_reprefilled -= paid
                debt -= paid
                if not debt:
                    break
            total = self.totals.get(code)
            if debt and total is not None:  # from the findings past the listed ones
                listed = sum(d.tokens_reprefilled for d in self.diagnostics if d.code == code)
                paid = min(debt, total.tokens_reprefilled - listed)
                total.tokens_reprefilled -= paid
                debt -= paid
            self.summary.unpaid_tokens += debt
            for groups in self.groupings:
                groups.settle(code, owed - debt)
        self.debts.clear()

    def _replay_fixed(self) -> None:
        """Replay the fixed log (`pcache.rules.fixed_replay`), charge each fix what it saves
        there, and write the fixed log when asked."""
        summary = self.summary
        if not self.plan and self.write_fixed is None:
            summary.prompt_tokens_if_fixed = summary.prompt_tokens
            summary.reusable_tokens_if_fixed = summary.reusable_tokens
            for total in (total for groups in self.groupings for total in groups.totals):
                total.prompt_tokens_if_fixed = total.prompt_tokens
                total.reusable_tokens_if_fixed = total.reusable_tokens
            return
        started = time.perf_counter()
        writer = FixedWriter(self.write_fixed) if self.write_fixed is not None else None
        try:
            requests = (request for source in self.sources for request in source())
            self.replay_fixed(self.fixed_log(), requests, writer)
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        if writer is not None:
            writer.commit()
        self.seconds["fixed"] = time.perf_counter() - started

    def fixed_log(self, kind: type[FixedLog] = FixedLog) -> FixedLog:
        """The fixed log of this pass's requests, replayed from its first request."""
        return kind(
            self.plan,
            self.settings,
            self.costs.models,
            self.costs.lifetime_ms,
            self.predecessors,
            self.needed,
            self.holders,
        )

    def replay_fixed(self, fixed_log: FixedLog, requests, writer: FixedWriter | None) -> None:
        """Replay `requests` (linted, in order) in the fixed log, add up the fixed log's
        figures and charge each fix what it saves."""
        summary = self.summary
        for outcome in fixed_log.replay(requests, self.lost):
            summary.prompt_tokens_if_fixed += len(outcome.fixed_tokens)
            summary.reusable_tokens_if_fixed += outcome.fixed_reused
            summary.requests_changed_if_fixed += outcome.fixed.changed
            for groups in self.groupings:
                groups.add_fixed(outcome.number, len(outcome.fixed_tokens), outcome.fixed_reused)
            self._charge_fixed(outcome)
            if writer is not None:
                writer.write(written_body(outcome.fixed))

    def _charge_fixed(self, outcome) -> None:
        """Charge one request's saving in the fixed log to the fixes that changed it (or that
        changed the request it now reuses), as findings on the requests they changed."""
        fixed = outcome.fixed
        direct = list(dict.fromkeys(fixed.direct))
        fixes = list(dict.fromkeys([*direct, *fixed.carried])) or list(outcome.holder_fixes)
        for fix in direct:
            if fix not in self.first_changes:  # kept without its render
                number, context, position, message = self._where(fix, outcome)
                self.first_changes[fix] = (number, context.request, position, message)
        added = len(outcome.fixed_tokens) - len(outcome.tokens)
        if added and fixes:  # what the fixed prompt's cached tokens cost more (or less)
            share, left = divmod(added, len(fixes))
            for index, fix in enumerate(fixes):
                self.priced.lengthen(
                    outcome.number, fix.rule.code, share + (left if not index else 0)
                )
        if not outcome.saving or not fixes:
            return
        share, left = divmod(outcome.saving, len(fixes))
        for index, fix in enumerate(fixes):
            tokens = share + (left if index == 0 else 0)
            for groups in self.groupings if tokens else ():
                groups.charge(outcome.number, fix.rule.code, tokens)
            if tokens < 0:
                self.debts[fix.rule.code] = self.debts.get(fix.rule.code, 0) - tokens
                continue
            if not tokens:
                continue
            if fix in direct:
                diagnostic = self._fixed_finding(fix, self._where(fix, outcome))
            elif fix.diagnostic is not None:
                diagnostic = fix.diagnostic
            else:
                diagnostic = self._fixed_finding(fix, self.first_changes[fix])
            diagnostic.tokens_reprefilled += tokens
            self.totals[fix.rule.code].tokens_reprefilled += tokens

    def _where(self, fix: Fix, outcome) -> tuple[int, RequestContext, int | None, str]:
        """(request number, the request as sent, the first token the fix changed there, the
        finding's message)."""
        position = common_prefix_length(outcome.tokens, outcome.fixed_tokens)
        if position >= len(outcome.tokens):
            position = None
        return outcome.number, outcome.context, position, _fixed_message(fix, outcome)

    def _fixed_finding(self, fix: Fix, where) -> Diagnostic:
        """The finding of `fix` on a request it changed (the check's finding there, if the
        rule's check reported the request, made the divergence's)."""
        number, current, position, message = where
        if isinstance(current, Request):
            current = RequestContext(current, self.settings)
        original = current.request
        key = (number, fix.rule.code)
        found = self.fixed_findings.get(key)
        if found is not None:
            return found
        checked = self.check_findings.pop(key, None)
        if checked is not None:
            checked.severity, checked.message = fix.rule.severity, message
            checked.fix_title = fix.hint
            if position is not None:
                checked.token_position = position
            diagnostic = checked
        else:
            path = None
            if position is not None and original.messages:
                path = _path_from(current.rendered, position)  # where the fix changes it
            if number == fix.origin and fix.cause in MESSAGE_CAUSES:
                path = original.source_path(fix.path)  # the message as a whole
            path = path or original.source_path(fix.path)
            violation = Violation(message, path, token_position=position, fix_title=fix.hint)
            diagnostic = self._report(fix.rule, violation, current, position)
        self.fixed_findings[key] = diagnostic
        if fix.diagnostic is None:
            fix.diagnostic = diagnostic
        return diagnostic

    def _demote_constant_values(self) -> None:
        """A clock or an id that the log never changes costs nothing in it: the check's finding
        is kept only when the rule was asked for, as information (one request alone keeps
        its warning)."""
        if self.summary.requests < 2:
            return
        fixed_codes = {fix.rule.code for fix in self.plan.fixes}
        listed = {id(diagnostic) for diagnostic in self.diagnostics}
        dropped = set()
        for diagnostic in self.check_findings.values():
            code = diagnostic.code
            if code not in CONSTANT_VALUE_CODES or code in fixed_codes:
                continue
            if diagnostic.tokens_reprefilled or diagnostic.severity == "info":
                continue
            if code in self.explicit:
                diagnostic.severity = "info"
                continue
            dropped.add(id(diagnostic))
            self.totals[code].count -= 1
            if self.request_groups is not None:
                self.request_groups.uncount(diagnostic.extra["group"], code)
            if not self.totals[code].count:
                del self.totals[code]
            if id(diagnostic) not in listed:  # counted past the listed ones
                self.summary.findings_not_listed -= 1
                self.failing_not_listed -= 1
        if dropped:
            self.diagnostics = [d for d in self.diagnostics if id(d) not in dropped]

    def _settle_unattributed(self) -> None:
        """What no finding is charged, split so that it adds up with the findings exactly."""
        summary = self.summary
        attributed = sum(total.tokens_reprefilled for total in self.totals.values())
        left = max(summary.reprefilled_tokens - attributed, 0)
        unattributed = summary.unattributed
        unattributed["first_request"] = min(unattributed["first_request"], left)
        left -= unattributed["first_request"]
        unattributed["partial_blocks"] = min(unattributed["partial_blocks"], left)
        unattributed["new_content"] = left - unattributed["partial_blocks"]
        unattributed["unreported"] = 0

    def _price(self) -> None:
        """The run's money (`pcache.rules.money`), and each group's."""
        book = self.prices
        forced = book.forced.family if book.forced is not None else None
        money = price_rows(self.priced.totals, book.priced, book.missing, forced)
        if money.total is not None and self.request_groups is not None:
            group_money(self.summary.groups, self.priced.totals, book.priced, money.span_ms)
        self.summary.money = money

    def finish(self) -> LintReport:
        self._replay_fixed()
        self._settle_debts()
        self._demote_constant_values()
        self._settle_unattributed()
        self.summary.rules = [self.totals[code] for code in sorted(self.totals)]
        if self.request_groups is not None:
            self.summary.group_by = self.request_groups.keys
            self.summary.groups = self.request_groups.ranked()
        self._price()
        self.summary.stage_seconds = {k: round(v, 3) for k, v in self.seconds.items()}
        self.diagnostics.sort(key=Diagnostic.sort_key)
        failing = self.failing_not_listed + sum(
            1 for d in self.diagnostics if d.severity != "info" or d.code in self.explicit
        )
        return LintReport(self.diagnostics, self.summary, failing)


def _fixed_message(fix: Fix, outcome) -> str:
    detail = f" ({fix.detail})" if fix.detail else ""
    since = f" since request {fix.partner}" if outcome.number == fix.origin else ""
    moved = outcome.fixed.moved.get(fix)
    shown = fix.value if outcome.number == fix.origin else ""
    value = f": {short(moved)}" if moved else f": {shown}" if shown else ""
    return f"{fix.summary}{detail}{since}{value}"


MESSAGE_CAUSES = frozenset(
    {"history_edit", "history_truncated", "compaction", "system_message_moved"}
)
"""Causes about a message as a whole: reported at the message where they were seen."""


def _path_from(rendered, position: int) -> str | None:
    """The JSON path of the text at token `position`, or of the first text after it (a tool
    list reordered parts in the template's text around the tools)."""
    char = rendered.token_char(position)
    for span in rendered.spans:
        if span.end > char:
            return span.path
    return None


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
    with redacting(options.redact):
        return _lint_paths(paths, options, config or LintConfig(), progress)


def _lint_paths(paths, options: LintOptions, config: LintConfig, progress) -> LintReport:
    inputs = find_inputs(paths, options.column)
    files = inputs.files
    fixed_files: list[str] = []
    if options.fix:  # the safe fixes apply whether or not their hints are shown
        fixable = tuple(code for code, rule in RULES.items() if rule.fix_availability != "none")
        extended = dataclasses.replace(
            options.selection, extend=(*options.selection.extend, *fixable)
        )
        fixing = dataclasses.replace(options, selection=extended, write_fixed=None)
        first = _lint_files(files, fixing, config, None)
        fixable = sorted({d.file for d in first.diagnostics if d.fixable})
        fixed_files = fix_files(fixable)
    report = _lint_files(files, options, config, progress)
    report.summary.fixed_files = fixed_files
    report.summary.skipped_tables = inputs.skipped_tables
    return report


def _lint_files(files, options, config, progress) -> LintReport:
    """One pass over `files`."""
    run = _Run(options, config, progress)
    for path in files:
        run.lint_file(path)
    return run.finish()


def lint_values(values: list[object], options: LintOptions, source: str = "<memory>") -> LintReport:
    """Lint parsed request bodies in order, as lines of one JSONL source (tests, libraries)."""
    with redacting(options.redact):
        return _lint_values(values, options, source)


def _lint_values(values: list[object], options: LintOptions, source: str) -> LintReport:
    run = _Run(options, LintConfig(), None)
    run.summary.files = 1

    def items() -> Iterator[Request | InputError]:
        for line, value in enumerate(values, 1):
            try:
                yield request_from_document(value, source, line)
            except InputError as failure:
                yield failure

    run.sources.append(lambda: (item for item in items() if isinstance(item, Request)))
    for item in items():
        run.lint_item(item)
    return run.finish()
