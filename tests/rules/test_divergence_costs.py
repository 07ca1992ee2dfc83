"""One explanation of every lost token, across sessions and users.

Logs of many sessions and users are generated with one cause planted in the part every request
shares (a clock, an id, a per-user profile, schema key order, tool order, the tool set, a tool
description). For each:

- every charged finding has the cause's rule code, and there is one;
- the tokens charged to it equal what `replay --simulate` saves on the fixed log lint writes
  (`--write-fixed`: the fix the rule names, applied) against the log as is, exactly;
- `pcache diff` on two requests of different sessions names the same rule;
- the clean variant (the defect removed, as the rule's "Use instead" says) has no error or
  warning.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta, timezone
from itertools import pairwise

import pytest

import pcache
from pcache.pipeline import Settings
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.rules.runner import LintOptions, lint_paths
from pcache.traces.readers import read_trace

TOKENIZER = "o200k_base"
INSTRUCTIONS = (
    "You are the support agent of Example Travel. Answer in the customer's language, cite the"
    " booking number when you refer to a booking, never promise refunds the policy does not"
    " allow, and hand over to a human when the customer asks for one. Keep answers short: two"
    " or three sentences, then a question if something is missing. Use the tools to look up"
    " bookings, flights and the refund policy; do not guess what they would return."
)
QUESTIONS = [
    "Where is my booking?",
    "Can I change my flight to Friday?",
    "I want a refund for my hotel.",
    "My seat was changed without notice.",
    "Do you allow pets in the cabin?",
    "How much luggage can I bring?",
]
TOOLS = [
    ("find_booking", "Look up a booking by its number or the customer's email."),
    ("search_flights", "Search the {count} flights of the schedule by route and date."),
    ("refund_policy", "Return the refund policy that applies to a booking."),
    ("hand_over", "Hand the conversation over to a human agent."),
]
CAUSES = {
    "clock": "PC101",
    "random_id": "PC103",
    "per_user": "PC104",
    "key_order": "PC201",
    "tool_order": "PC301",
    "tool_set": "PC302",
    "tool_definition": "PC303",
}
CLOCK_FORMATS = [
    lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ"),
    lambda t: t.strftime("%Y-%m-%d %H:%M"),
    lambda t: t.strftime("%a, %d %b %Y %H:%M:%S GMT"),
    lambda t: t.strftime("%I:%M %p"),
    lambda t: str(int(t.timestamp())),
]


def _tool(index: int, count: int, reverse_keys: bool) -> dict:
    name, description = TOOLS[index]
    properties = {"query": {"type": "string"}, "limit": {"type": "integer"}}
    parameters = {"type": "object", "properties": properties, "required": ["query"]}
    if reverse_keys:
        parameters = {"required": ["query"], "properties": properties, "type": "object"}
    function = {
        "name": name,
        "description": description.format(count=count),
        "parameters": parameters,
    }
    return {"type": "function", "function": function}


def generate(cause: str, seed: int) -> tuple[list[dict], list[dict], list[dict]]:
    """(planted, corrected, clean): sessions of several users, the cause planted in the shared
    part; corrected repeats the first request's value everywhere; clean has no such value."""
    rng = random.Random(seed)
    start = datetime(2026, 11, 29, 9, 0, tzinfo=timezone.utc)
    clock_format = rng.choice(CLOCK_FORMATS)
    logs: tuple[list[dict], list[dict], list[dict]] = ([], [], [])
    first: dict[str, object] = {}
    minutes = 0
    for session in range(rng.randint(4, 7)):
        user = f"u{session}"
        messages: list[dict] = []
        order = list(range(len(TOOLS)))
        if cause == "tool_order":
            rng.shuffle(order)
        dropped = rng.randrange(len(TOOLS)) if cause == "tool_set" and session % 2 else None
        count = 1200 + 7 * session
        for turn in range(rng.randint(1, 3)):
            minutes += rng.randint(1, 40)
            messages.append({"role": "user", "content": rng.choice(QUESTIONS)})
            now = start + timedelta(minutes=minutes)
            values = {
                "clock": f"Current time: {clock_format(now)}.",
                "random_id": f"Request id: {rng.getrandbits(128):032x}.",
                "per_user": f"Customer profile: {user}, member since {2010 + session},"
                f" prefers {'email' if session % 2 else 'phone'} contact.",
            }
            value = values.get(cause, "")
            first.setdefault("value", value)
            for log, shown in zip(logs, (value, first["value"], ""), strict=True):
                planted = log is logs[0]
                if cause == "per_user":
                    system = f"{INSTRUCTIONS}\n\n{shown}" if shown else INSTRUCTIONS
                else:
                    system = f"{shown}\n{INSTRUCTIONS}" if shown else INSTRUCTIONS
                kept = [i for i in order if i != dropped] if planted else list(range(len(TOOLS)))
                if planted and cause == "tool_order":
                    kept = order
                shown_count = count if cause == "tool_definition" and planted else 1200
                if cause == "tool_definition" and log is logs[2]:
                    shown_count = 0
                reverse = cause == "key_order" and planted and session % 2 == 1
                tools = [_tool(i, shown_count, reverse) for i in kept]
                if shown_count == 0:
                    tools = [_without_count(tool) for tool in tools]
                body = {
                    "model": "gpt-4o",
                    "messages": [{"role": "system", "content": system}, *messages],
                    "tools": tools,
                    "user": user,
                    "metadata": {"session_id": f"s{session}"},
                }
                log.append(json.loads(json.dumps(body)))
            messages.append({"role": "assistant", "content": f"Reply {turn} to {user}."})
    return logs


def _without_count(tool: dict) -> dict:
    function = dict(tool["function"])
    function["description"] = function["description"].replace("the 0 flights", "the flights")
    return {**tool, "function": function}


def _write(tmp_path, name: str, log: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(body) + "\n" for body in log))
    return path


def _reprefilled(path) -> int:
    trace = read_trace(path, settings=Settings(tokenizer=TOKENIZER))
    result = simulate(trace, SimulationOptions(policy="vllm", block_size=16))
    return result.query_tokens - result.hit_tokens


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_a_planted_cause_is_charged_what_fixing_it_saves(cause, seed, tmp_path):
    planted, _, clean = generate(cause, seed)
    planted_path = _write(tmp_path, "planted.jsonl", planted)
    fixed_path = tmp_path / "fixed.jsonl"
    options = LintOptions(settings=Settings(tokenizer=TOKENIZER), write_fixed=str(fixed_path))
    report = lint_paths([str(planted_path)], options)
    charged = [d for d in report.diagnostics if d.tokens_reprefilled]
    rule = CAUSES[cause]
    assert charged, [(d.code, d.message) for d in report.diagnostics]
    assert {d.code for d in charged} == {rule}, [(d.code, d.message) for d in charged]
    tokens = sum(d.tokens_reprefilled for d in charged)
    saved = _reprefilled(planted_path) - _reprefilled(fixed_path)
    assert tokens == saved + report.summary.unpaid_tokens, (tokens, saved)
    summary = report.summary
    assert summary.reusable_tokens_if_fixed <= summary.prompt_tokens_if_fixed
    assert summary.reusable_tokens <= summary.reusable_tokens_if_fixed

    heads = [body for body in planted if len(body["messages"]) == 2]
    pair = next(
        (a, b)
        for a, b in pairwise(heads)
        if a["messages"][0] != b["messages"][0] or json.dumps(a["tools"]) != json.dumps(b["tools"])
    )
    result = pcache.diff(pair[0], pair[1], tokenizer=TOKENIZER)
    assert result.cause is not None and result.cause.rule is not None, result.cause
    assert result.cause.rule["code"] == rule, result.cause

    clean_report = lint_paths(
        [str(_write(tmp_path, "clean.jsonl", clean))],
        LintOptions(settings=Settings(tokenizer=TOKENIZER)),
    )
    loud = [d for d in clean_report.diagnostics if d.severity in ("error", "warning")]
    assert not loud, [(d.code, d.message) for d in loud]
