"""Lint on logs shaped like a gateway's: many sessions of one or two apps interleaved in time, no
session ids, one cache breaker planted in some sessions (`tests.rules.shared_logs`).

- every planted cause is reported with its code on the planted sessions' requests, on a log of
  the planted sessions alone, interleaved with clean sessions of the same app, and interleaved
  with another app's sessions, with default settings; the clean sessions get no error or
  warning;
- what the findings are charged is what `replay --simulate` of the fixed log (`--write-fixed`)
  saves against the log as is, exactly, and `if_fixed` is that replay;
- adding another app's sessions changes no finding of the others (code, request, tokens);
- the cause of a planted value is the same whichever earlier request it is compared with
  (`pcache diff` against its session's previous request and against a clean session's);
- `pcache diff` names the finding's rule on the pair the finding names.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pcache
from pcache.pipeline import Settings
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.rules.runner import LintOptions, lint_paths
from pcache.traces.readers import read_trace
from tests.rules.shared_logs import PLANTED, SHAPES, build, interleave

TOKENIZERS = ("gpt-oss", "o200k_base")
"""The default renderer, and a ChatML one that renders the reasoning of earlier turns."""
FREE_ON = {"gpt-oss": {"reasoning"}, "o200k_base": {"reasoning"}}
"""Causes a renderer makes free: both templates drop the reasoning of earlier turns themselves
(the rule still reports the body, charged nothing)."""
LOUD = ("error", "warning")


def _write(path, bodies: list[dict]):
    path.write_text("".join(json.dumps(body) + "\n" for body in bodies))
    return path


def _replayed(path, tokenizer: str) -> tuple[int, int]:
    trace = read_trace(path, settings=Settings(tokenizer=tokenizer))
    result = simulate(trace, SimulationOptions(policy="vllm", block_size=16))
    return result.query_tokens, result.hit_tokens


def _lint(path, tokenizer: str, fixed=None):
    options = LintOptions(
        settings=Settings(tokenizer=tokenizer), write_fixed=str(fixed) if fixed else None
    )
    return lint_paths([str(path)], options)


def _line(diagnostic) -> int | None:
    label = diagnostic.request
    return int(label.rsplit(":", 1)[1]) if ":" in label else None


def _by_session(report, labels: list[str]) -> dict[str, list]:
    """Loud findings on requests, by whose session they are on (`planted` / `clean`)."""
    found: dict[str, list] = {"planted": [], "clean": []}
    for diagnostic in report.diagnostics:
        line = _line(diagnostic)
        if line is None or diagnostic.severity not in LOUD:
            continue  # the chat template's own findings, information
        found["planted" if labels[line - 1].startswith("p") else "clean"].append(diagnostic)
    return found


def _shown(diagnostics) -> list[tuple]:
    return [(d.code, d.request, d.tokens_reprefilled, d.message) for d in diagnostics]


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("cause", sorted(PLANTED))
def test_a_planted_cause_is_found_on_its_sessions_and_charged_its_fix(
    cause, shape, tokenizer, tmp_path
):
    bodies, labels = build(cause, shape, seed=7)
    log = _write(tmp_path / "log.jsonl", bodies)
    fixed = tmp_path / "fixed.jsonl"
    report = _lint(log, tokenizer, fixed)
    found = _by_session(report, labels)
    code = PLANTED[cause]
    assert not found["clean"], _shown(found["clean"])
    codes = {d.code for d in found["planted"]}
    assert codes == {code}, _shown(found["planted"])
    tokens = sum(d.tokens_reprefilled for d in found["planted"])
    assert tokens == 0 if cause in FREE_ON.get(tokenizer, ()) else tokens > 0
    summary = report.summary
    prompt, hits = _replayed(log, tokenizer)
    prompt_fixed, hits_fixed = _replayed(fixed, tokenizer)
    assert (summary.prompt_tokens, summary.reusable_tokens) == (prompt, hits)
    assert (summary.prompt_tokens_if_fixed, summary.reusable_tokens_if_fixed) == (
        prompt_fixed,
        hits_fixed,
    )
    charged = sum(total.tokens_reprefilled for total in summary.rules if total.code == code)
    assert charged == (prompt - hits) - (prompt_fixed - hits_fixed) + summary.unpaid_tokens


@pytest.mark.parametrize("cause", sorted(PLANTED))
def test_diff_names_the_rule_of_each_finding(cause, tmp_path):
    """Each finding on a planted request, diffed against its session's previous request (or,
    for a session's first request, against the request before it): the same rule."""
    bodies, labels = build(cause, "same_app", seed=11)
    report = _lint(_write(tmp_path / "log.jsonl", bodies), "o200k_base")
    found = [d for d in _by_session(report, labels)["planted"]]
    assert found, _shown(report.diagnostics)
    compared = 0
    for diagnostic in found:
        later = _line(diagnostic) - 1
        session = [i for i in range(later) if labels[i] == labels[later]]
        earlier = session[-1] if session else later - 1
        if earlier < 0:
            continue
        result = pcache.diff(bodies[earlier], bodies[later], tokenizer="o200k_base")
        if cause in FREE_ON["o200k_base"]:  # the render does not change: nothing breaks
            assert result.cause is not None and result.cause.kind == "append", result.cause
            compared += 1
            continue
        if result.cause is None or result.cause.rule is None:
            assert not session, (diagnostic.message, result.cause)  # another session's
            continue
        assert result.cause.rule["code"] == diagnostic.code, (diagnostic.message, result.cause)
        compared += 1
    assert compared, _shown(found)


VALUE_CAUSES = ("clock", "random_id", "per_user", "tool_trace_id")


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cause=st.sampled_from(VALUE_CAUSES), seed=st.integers(0, 10_000))
def test_the_cause_of_a_planted_value_is_the_same_against_any_earlier_request(cause, seed):
    bodies, labels = build(cause, "same_app", seed)
    planted = [i for i, label in enumerate(labels) if label == "p0"]
    clean = [i for i, label in enumerate(labels) if label.startswith("c")]
    later = planted[-1]
    partners = [planted[-2], clean[0]]
    if cause == "per_user":  # another user's planted session, and a user with no profile
        partners = [next(i for i, label in enumerate(labels) if label == "p1"), clean[0]]
    rules = set()
    for partner in partners:
        result = pcache.diff(bodies[partner], bodies[later], tokenizer="o200k_base")
        rules.add(result.cause.rule["code"] if result.cause and result.cause.rule else None)
    assert rules == {PLANTED[cause]}, (cause, rules)


def _findings(report, keys: list[str]) -> set[tuple]:
    """(code, request key, tokens) of each finding on a request (keys: each line's request)."""
    return {
        (d.code, keys[_line(d) - 1], d.tokens_reprefilled, d.severity)
        for d in report.diagnostics
        if _line(d) is not None
    }


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cause=st.sampled_from(sorted(PLANTED)),
    seed=st.integers(0, 10_000),
    tokenizer=st.sampled_from(TOKENIZERS),
)
def test_another_apps_sessions_change_no_finding_of_the_others(
    cause, seed, tokenizer, tmp_path_factory
):
    folder = tmp_path_factory.mktemp("apps")
    bodies, labels = build(cause, "same_app", seed)
    others, other_labels = build("clock", "other_app", seed + 1)
    pairs = zip(others, other_labels, strict=True)
    other = [(body, f"o-{label}") for body, label in pairs if label.startswith("c")]
    mixed, _ = interleave(list(zip(bodies, labels, strict=True)), other, random.Random(seed))
    alone = _lint(_write(folder / "alone.jsonl", bodies), tokenizer)
    together = _lint(_write(folder / "mixed.jsonl", mixed), tokenizer)
    keys = [json.dumps(body, sort_keys=True) for body in bodies]
    mixed_keys = [json.dumps(body, sort_keys=True) for body in mixed]
    ours = {f for f in _findings(together, mixed_keys) if f[1] in set(keys)}
    assert ours == _findings(alone, keys)
    assert not [
        f for f in _findings(together, mixed_keys) if f[1] not in set(keys) and f[3] in LOUD
    ]


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cause=st.sampled_from(sorted(PLANTED)), seed=st.integers(0, 10_000))
def test_clean_sessions_of_the_same_app_keep_every_code_on_the_planted_session(
    cause, seed, tmp_path_factory
):
    folder = tmp_path_factory.mktemp("same")
    alone_bodies, alone_labels = build(cause, "alone", seed)
    bodies, labels = build(cause, "same_app", seed)
    alone = _by_session(
        _lint(_write(folder / "alone.jsonl", alone_bodies), "o200k_base"), alone_labels
    )
    mixed = _by_session(_lint(_write(folder / "mixed.jsonl", bodies), "o200k_base"), labels)
    # every code found on the session alone is still found; mixing may only add its own code
    # (a fix can save a block more against the clean sessions' prompts)
    assert {d.code for d in alone["planted"]} <= {d.code for d in mixed["planted"]}
    assert {d.code for d in mixed["planted"]} <= {PLANTED[cause]}
    assert not mixed["clean"], _shown(mixed["clean"])


def test_a_value_that_never_changes_costs_nothing_and_is_no_warning(tmp_path):
    """40 sessions whose system prompt starts with the same date: no warning, nothing charged."""
    bodies = []
    rng = random.Random(3)
    for session in range(40):
        for turn in range(3):
            history = []
            for earlier in range(turn):
                history += [
                    {"role": "user", "content": f"Question {session}.{earlier}"},
                    {"role": "assistant", "content": f"Answer {session}.{earlier} " * 5},
                ]
            question = {"role": "user", "content": f"Question {session}.{turn} {rng.random()}"}
            system = "Today is 2026-11-30.\nYou are a helpful assistant for Example Corp. " * 3
            bodies.append({"messages": [{"role": "system", "content": system}, *history, question]})
    for tokenizer in TOKENIZERS:
        report = _lint(_write(tmp_path / "log.jsonl", bodies), tokenizer)
        loud = [d for d in report.diagnostics if d.severity in LOUD and _line(d) is not None]
        assert not loud, _shown(loud)
        assert report.summary.reusable_tokens_if_fixed == report.summary.reusable_tokens


def test_a_time_of_day_in_a_single_request_stays_a_warning(tmp_path):
    body = {
        "messages": [
            {"role": "system", "content": "You are a helpful agent. Current time: 10:16:02."},
            {"role": "user", "content": "hi"},
        ]
    }
    report = _lint(_write(tmp_path / "one.jsonl", [body]), "o200k_base")
    assert [(d.code, d.severity) for d in report.diagnostics] == [("PC101", "warning")]


MIXABLE = sorted(set(PLANTED) - {"reasoning"})


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    causes=st.lists(st.sampled_from(MIXABLE), min_size=2, max_size=5, unique=True),
    seed=st.integers(0, 10_000),
)
def test_several_causes_in_one_log_each_stay_on_their_sessions(causes, seed, tmp_path_factory):
    """One log of one app whose sessions each plant another cause, interleaved with clean
    sessions: every finding is its session's cause, and they add up to the fixed log's saving."""
    rng = random.Random(seed)
    merged: list = []
    for index, cause in enumerate(causes):
        bodies, labels = build(cause, "same_app" if index == 0 else "alone", seed + index)
        pairs = [(body, f"{cause}/{label}") for body, label in zip(bodies, labels, strict=True)]
        merged = pairs if not merged else list(zip(*interleave(merged, pairs, rng), strict=True))
    bodies, labels = [body for body, _ in merged], [label for _, label in merged]
    folder = tmp_path_factory.mktemp("mixed")
    log, fixed = _write(folder / "log.jsonl", bodies), folder / "fixed.jsonl"
    report = _lint(log, "o200k_base", fixed)
    for diagnostic in report.diagnostics:
        line = _line(diagnostic)
        if line is None or diagnostic.severity not in LOUD:
            continue
        cause, session = labels[line - 1].split("/")
        assert session.startswith("p"), _shown([diagnostic])
        assert diagnostic.code == PLANTED[cause], (cause, _shown([diagnostic]))
    summary = report.summary
    prompt, hits = _replayed(log, "o200k_base")
    prompt_fixed, hits_fixed = _replayed(fixed, "o200k_base")
    charged = sum(total.tokens_reprefilled for total in summary.rules)
    assert charged == (prompt - hits) - (prompt_fixed - hits_fixed) + summary.unpaid_tokens


@pytest.mark.parametrize(
    "log",
    [
        "samples/prompts/agent_log.jsonl",
        "tests/data/shapes/chat.jsonl",
        "tests/data/shapes/gemini.jsonl",
        "tests/data/shapes/bedrock.jsonl",
        "tests/data/shapes/responses.jsonl",
        "tests/data/shapes/otel.jsonl",
    ],
)
def test_the_written_fixed_log_replays_to_if_fixed(log, tmp_path):
    """Batch lines, Gemini, Bedrock, Responses chains and spans: `--write-fixed`'s log, read
    back by `replay --simulate`, is the log lint replayed."""
    fixed = tmp_path / "fixed.jsonl"
    summary = _lint(log, "gpt-oss", fixed).summary
    assert summary.requests_changed_if_fixed > 0
    assert _replayed(fixed, "gpt-oss") == (
        summary.prompt_tokens_if_fixed,
        summary.reusable_tokens_if_fixed,
    )
