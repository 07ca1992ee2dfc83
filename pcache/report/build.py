"""`pcache report` as one function: lint the log, replay it, grow its prefix tree.

Nothing here computes a cost, a hit or a cause of its own: lint's figures come from
`pcache.rules.runner.lint_paths`, the replay's from `pcache.replayer.simulate.driver` (the capacity
sweep and an unlimited cache), the causes at branch points from `pcache.diff.explain`; the
prefix tree counts which requests share which tokens and reads the profile's reuse rule
(`pcache.cache.reuse.reusable`) to say what a cache reuses of it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pcache.cache.capacity import resolve_model
from pcache.cache.profiles import load_profile
from pcache.cache.reuse import reusable
from pcache.errors import InputError, UsageError
from pcache.models import DEFAULT_MODEL
from pcache.pipeline import Settings, WithSettings
from pcache.prompt.renderers.render import resolve_renderer
from pcache.replayer.fleet.options import FleetOptions
from pcache.replayer.report import ReplayReport
from pcache.report.causes import BranchPoint, Origin, branch_points, explain_branch_points
from pcache.report.outcomes import ReplayFile, read_replay_file
from pcache.report.tree import Branch, PrefixTrie, fold, iter_branches
from pcache.text.redaction import redacting
from pcache.traces.readers import read_trace
from pcache.traces.record import Trace

if TYPE_CHECKING:
    from pcache.replayer.calibration import Calibration

HASH_FORMATS = ("mooncake", "bailian")


@dataclass(frozen=True, slots=True)
class ReportOptions(WithSettings):
    paths: list[str]
    replay_files: list[str] = field(default_factory=list)
    calibration: str | None = None
    """A file of `pcache replay --engine --save-calibration`: its fit predicts the TTFTs."""
    settings: Settings = field(default_factory=Settings)
    """Tokenizer, block size, date and profile, as lint and replay take them."""
    model: str = DEFAULT_MODEL
    sweep_points: int = 8
    max_nodes: int = 240
    """Drawn nodes of the prefix tree; the rest is folded."""
    labelled_branches: int = 12
    max_findings: int = 2000
    """Findings listed in the page's table (all are counted in the chart and the summary)."""
    fleet: FleetOptions | None = None
    """`--replicas`, `--router`: the log also replayed over a fleet grid (unlimited pools)."""
    redact: bool = False
    """No string of a request on the page: findings and excerpts as shapes (`--redact`)."""
    group_by: tuple[str, ...] = ()
    """Keys lint's totals are also split by (`--group-by`: `pcache.rules.groups`)."""
    price: str | None = None
    """The model whose price applies to every request (`--price`; `pcache.cache.prices`)."""


@dataclass(slots=True)
class TreeNode:
    """A drawn node of the prefix tree and what the cache does with it."""

    id: int
    start: int
    end: int
    requests: int
    first_request: str
    reused_end: int
    """Tokens [start, reused_end) are reused by later requests (empty when one request)."""
    folded: int
    children: list[TreeNode]
    strips: list[tuple[int, int]]
    """Folded nodes: (requests, mean prompt end) strips, longest prompts first."""


@dataclass(slots=True)
class PrefixTree:
    requests: int
    max_tokens: int
    nodes_total: int
    """Nodes of the whole tree before folding."""
    nodes_drawn: int
    branches_folded: int
    unit_tokens: int
    profile: str
    root: TreeNode
    branch_points: list[BranchPoint]


@dataclass(slots=True)
class Report:
    """Everything the page shows (`pcache report --format json` is this dataclass)."""

    inputs: list[str]
    trace_format: str
    settings: dict[str, Any]
    lint: Any
    """The `LintReport` (request logs) or None (hash-id traces: nothing to lint)."""
    tree: PrefixTree | None
    """None only while the report is handed to `build_report`'s `replayed`."""
    replay: ReplayReport
    """The log replayed through an unlimited vllm cache (per-request outcomes kept)."""
    sweep: list[ReplayReport]
    replay_files: list[ReplayFile]
    skipped: list[str]
    max_findings: int
    fleet: list[ReplayReport] = field(default_factory=list)
    """The fleet grid (`--replicas`, `--router`): one report per router and replica count."""

    def to_dict(self) -> dict[str, Any]:
        lint = None
        if self.lint is not None:
            lint = {
                "findings": [d.as_dict() for d in self.lint.diagnostics],
                "summary": self.lint.summary.as_dict(),
            }
        return {
            "inputs": self.inputs,
            "trace_format": self.trace_format,
            "settings": self.settings,
            "lint": lint,
            "tree": asdict(self.tree),
            "replay": self.replay.to_dict(),
            "per_request": [outcome.to_dict() for outcome in self.replay.per_request],
            "sweep": [report.to_dict() for report in self.sweep],
            "replay_files": [
                {
                    "source": item.source,
                    "measured": item.measured,
                    "per_request": [outcome.to_dict() for outcome in item.outcomes],
                }
                for item in self.replay_files
            ],
            "skipped": self.skipped,
            "fleet": [report.to_dict() for report in self.fleet],
        }


def build_report(
    options: ReportOptions,
    stage: Callable[[str], None] | None = None,
    replayed: Callable[[Report], None] | None = None,
) -> Report:
    """Lint, replay and fold the log at `options.paths` into one `Report`; `stage(text)` is
    told what is being computed, `replayed(report)` is given the report before its prefix
    tree is grown (`tree` None), e.g. to draw its charts meanwhile."""
    with redacting(options.redact):
        return _build_report(options, stage or (lambda text: None), replayed)


def _build_report(
    options: ReportOptions,
    stage: Callable[[str], None],
    replayed: Callable[[Report], None] | None,
) -> Report:
    from pcache.replayer.simulate.options import SimulateOptions
    from pcache.replayer.simulate.sweep import capacity_sweep
    from pcache.rules.runner import expand_paths

    replay_files = [read_replay_file(path) for path in options.replay_files]
    calibration = None
    if options.calibration is not None:
        from pcache.replayer.calibration import load_calibration

        calibration = load_calibration(options.calibration)
    files = expand_paths(options.paths)
    # `pcache replay --simulate` with the report's model, tokenizer, block size and date (its
    # own options class: the other drivers' are not imported)
    arguments = SimulateOptions(
        model=options.model,
        tokenizer_given=True,
        settings=Settings(
            tokenizer=options.tokenizer, block_size=options.block_size, date=options.date
        ),
    )
    if calibration is not None:
        arguments = replace(arguments, ttft=calibration.model)
    settings = arguments.settings
    if len(files) == 1 and _first_format(files[0]) in HASH_FORMATS:
        stage("reading")
        trace, origins = _read(files, settings)
        lint = None
    else:
        stage("reading, tokenizing and linting")
        lint, trace, origins = _lint_and_read(options, files, settings)
    hashed = trace.format in HASH_FORMATS

    shape = resolve_model(options.model)
    simulation = arguments.simulation_options(shape.kv_bytes_per_token)
    stage("replaying")
    swept = capacity_sweep(trace, simulation, options.sweep_points, True)

    fleet = []
    if options.fleet is not None:
        from pcache.replayer.fleet.driver import run_fleet

        stage("replaying over the fleet")
        fleet = run_fleet(trace, replace(simulation, cache_blocks=None), options.fleet)

    def grow_tree() -> PrefixTree:
        stage("growing the prefix tree")
        return _tree(trace, origins if not hashed else None, settings, options)

    tree = grow_tree() if replayed is None else None
    sweep = swept.reports
    replay = sweep[-1]  # the sweep ends at the footprint of an unlimited cache
    if replay.evicted_blocks:
        replay = swept.unlimited
    report = Report(
        inputs=list(options.paths),
        trace_format=trace.format,
        settings={
            "tokenizer": lint.summary.tokenizer if lint else "(block ids)",
            "profile": options.profile,
            "block_size": trace.block_size or options.block_size,
            "date": options.date,
            "model": shape.name,
            "replay_policy": simulation.policy,
            "ttft_model": asdict(simulation.ttft),
            "ttft_calibration": _describe(options.calibration, calibration),
            **({"redacted": True} if options.redact else {}),
        },
        lint=lint,
        tree=tree,
        replay=replay,
        sweep=sweep,
        replay_files=replay_files,
        skipped=trace.skipped,
        max_findings=options.max_findings,
        fleet=fleet,
    )
    if replayed is not None:
        replayed(report)
        report.tree = grow_tree()
    return report


def _describe(path: str | None, calibration: Calibration | None) -> dict[str, Any] | None:
    """Where the TTFT model was fitted (None: the default, uncalibrated model)."""
    if path is None or calibration is None:
        return None
    from pcache.files import display_name

    described = ("engine_model", "dtype", "device", "backend", "machine", "date", "samples")
    return {
        "source": display_name(path),
        **{key: getattr(calibration, key) for key in (*described, "rms_error_ms")},
    }


def _read(files: list[str], settings: Settings) -> tuple[Trace, list[Origin]]:
    """Every file's records in one trace, in file order, and where each record came from."""
    if len(files) == 1:
        trace = read_trace(files[0], settings=settings)
        origins = [_origin(files[0], trace.source, record.line) for record in trace.records]
        return trace, origins
    # Several files form one request log; a file with no request in it (a hash-id trace, a
    # list of token ids) is left out of the tree and the replay, as lint reports it (PC000).
    read, left_out = [], []
    for path in files:
        try:
            trace = read_trace(path, settings=settings)
        except InputError as failure:
            left_out.append(f"{failure}: left out of the tree and the replay")
            continue
        if trace.format in HASH_FORMATS:
            left_out.append(f"{trace.source}: a {trace.format} trace, left out (report it alone)")
            continue
        read.append((path, trace))
    if not read:
        raise InputError(", ".join(files), "no request log among these files")
    return _combine(read, left_out)


def _combine(read: list[tuple[str, Trace]], left_out: list[str]) -> tuple[Trace, list[Origin]]:
    """Several files' traces as one request log, in timestamp order (stable)."""
    source = ", ".join(trace.source for _, trace in read)
    combined = Trace(source=source, format="requests", block_size=None, skipped=left_out)
    origins = []
    for path, trace in read:
        for record in trace.records:
            record.index = len(combined.records)
            combined.records.append(record)
            origins.append(_origin(path, trace.source, record.line))
        combined.skipped.extend(trace.skipped)
        combined.has_timestamps = combined.has_timestamps or trace.has_timestamps
    stamps = [record.timestamp_ms for record in combined.records]
    if stamps != sorted(stamps):
        order = sorted(range(len(stamps)), key=stamps.__getitem__)
        combined.records = [combined.records[i] for i in order]
        origins = [origins[i] for i in order]
        for index, record in enumerate(combined.records):
            record.index = index
        combined.reordered = True
    return combined, origins


def _origin(path: str, source: str, line: int | None) -> Origin:
    return Origin(path, line, source if line is None else f"{source}:{line}")


def _first_format(path: str) -> str:
    """The format of a file's first valid line, as `read_trace` detects it."""
    from pcache.prompt.reading.loading import iter_values
    from pcache.traces.readers import detect_format

    try:
        for entry in iter_values(path, skip_errors=True):
            if not isinstance(entry, InputError):
                return detect_format(entry[1])
    except InputError:
        pass
    return "requests"


def _lint_and_read(options: ReportOptions, files: list[str], settings: Settings):
    """Lint the log and keep, from the same pass, each request's record and origin (the
    trace `_read` would read); `_read` reads it again only where a file held no request."""
    from pcache.files import display_name
    from pcache.traces.readers import record_of_request

    by_file: dict[str, tuple[list, list[str]]] = {display_name(path): ([], []) for path in files}
    current: list = [None, None]  # the source of the last request and its lists

    def observe(item, token_ids) -> None:
        source = item.source
        if source != current[0]:
            current[0], current[1] = source, by_file.setdefault(source, ([], []))
        records, skipped = current[1]
        if token_ids is None:
            skipped.append(str(item))
        else:
            salt = settings.cache_salt  # (no router reads the report's records: no routing text)
            records.append(record_of_request(item, token_ids, len(records), salt, routing=False))

    lint = _lint(options, observe)
    if len(by_file) != len(files) or not all(records for records, _ in by_file.values()):
        trace, origins = _read(files, settings)
        return lint, trace, origins
    traces = []
    for path in files:
        records, skipped = by_file[display_name(path)]
        trace = Trace(display_name(path), "requests", None, records, skipped)
        trace.has_timestamps = any(record.timestamp_ms for record in records)
        _sort(trace)
        traces.append((path, trace))
    if len(traces) == 1:
        path, trace = traces[0]
        return lint, trace, [_origin(path, trace.source, record.line) for record in trace.records]
    trace, origins = _combine(traces, [])
    return lint, trace, origins


def _sort(trace: Trace) -> None:
    """Records in timestamp order (stable), as `read_trace` leaves them."""
    stamps = [record.timestamp_ms for record in trace.records]
    if any(later < earlier for earlier, later in itertools.pairwise(stamps)):
        trace.records.sort(key=lambda record: record.timestamp_ms)
        trace.reordered = True


def _lint(options: ReportOptions, observer=None):
    """`pcache lint PATHS` with the same settings, the same `[tool.pcache.lint]` config;
    `observer` is told of each request (`LintOptions.observer`)."""
    from pathlib import Path

    from pcache.cache.prices import PriceBook
    from pcache.rules import RULES
    from pcache.rules.config import find_config, load_config
    from pcache.rules.groups import check_keys
    from pcache.rules.runner import LintOptions, lint_paths
    from pcache.rules.selection import SelectionInput, resolve

    config_path = find_config(Path.cwd())
    config = load_config(config_path)
    group_by = check_keys(list(options.group_by), config.apps)
    PriceBook(config.prices, options.price)  # a price named is one pcache knows
    selection = resolve(
        config.selection,
        SelectionInput(None, [], []),
        RULES,
        source=f"{config_path}" if config_path else "config",
    )
    lint_options = LintOptions(
        settings=options.settings,
        selection=selection,
        observer=observer,
        redact=options.redact,
        group_by=group_by,
        price=options.price,
        prices=tuple(config.prices.values()),
    )
    return lint_paths(list(options.paths), lint_options, config)


def _tree(trace: Trace, origins, settings: Settings, options: ReportOptions) -> PrefixTree:
    hashed = trace.block_size is not None
    unit = trace.block_size if hashed else 1
    trie = PrefixTrie(unit)
    for record in trace.records:
        units = record.hash_ids if hashed else record.token_ids
        assert units is not None
        trie.insert(units, record.input_length, record.cache_salt)
    root = fold(trie, options.max_nodes)
    points = branch_points(root, options.labelled_branches)
    renderer = resolve_renderer(settings.tokenizer) if origins else None
    labelled = explain_branch_points(points, origins, settings, renderer)
    profile = load_profile(options.profile)
    block_size = trace.block_size or options.block_size

    def label(index: int) -> str:
        return origins[index].label if origins else f"request {index} (line {_line(trace, index)})"

    def convert(branch: Branch) -> TreeNode:
        reused_end = branch.start
        if branch.requests > 1 and not branch.folded:  # a prompt continuing past the end
            shared = reusable(profile, branch.end, branch.end + 1, block_size)
            reused_end = max(branch.start, min(branch.end, shared))
        return TreeNode(
            id=branch.id,
            start=branch.start,
            end=branch.end,
            requests=branch.requests,
            first_request=label(branch.first_request),
            reused_end=reused_end,
            folded=branch.folded,
            children=[convert(child) for child in branch.children],
            strips=branch.strips,
        )

    drawn = list(iter_branches(root))
    return PrefixTree(
        requests=trie.root.requests,
        max_tokens=max(trie.lengths, default=0),
        nodes_total=_count_nodes(trie),
        nodes_drawn=sum(1 for branch in drawn if not branch.folded) - 1,
        branches_folded=sum(branch.folded for branch in drawn),
        unit_tokens=unit,
        profile=profile.name,
        root=convert(root),
        branch_points=labelled,
    )


def _line(trace: Trace, index: int) -> int | None:
    return trace.records[index].line


def _count_nodes(trie: PrefixTrie) -> int:
    total, stack = 0, [trie.root]
    while stack:
        node = stack.pop()
        total += 1
        stack.extend(node.children.values())
    return total - 1


def check_inputs(paths: list[str]) -> None:
    if not paths:
        raise UsageError("no input: pass a request log, a directory of requests or a trace")
    for path in paths:
        if path == "-":
            raise InputError("-", "pcache report reads files (the log is read twice)")
