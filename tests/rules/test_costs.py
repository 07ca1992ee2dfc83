"""Properties of lint's costs over generated logs with planted defects.

- lint's reusable tokens are `replay --simulate`'s hit tokens (unlimited, serial) on the same log;
- per-rule totals plus unattributed tokens are exactly the re-prefilled tokens;
- "if fixed" is `replay --simulate` of the log `--write-fixed` writes, and the findings' tokens
  add up to what it re-prefills less than the log as is;
- a log without the planted changes, linted with the defaults, has no charged finding and
  nothing to fix.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache.pipeline import Settings
from pcache.replayer.simulate.driver import SimulationOptions, simulate
from pcache.rules.runner import LintOptions, lint_paths
from pcache.traces.readers import read_trace

TOKENIZER = "o200k_base"
TOOLS = [
    ("read_file", "Read a file of the repository."),
    ("search_code", "Search the {count} indexed files of the repository."),
    ("run_tests", "Run the test suite and report failures."),
]
WORDS = st.sampled_from(
    ["fix the parser", "why does it fail?", "add a test", "rename the module", "ok", "thanks"]
)


def _tools(order: list[int], count: int) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": TOOLS[i][0],
                "description": TOOLS[i][1].format(count=count),
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        }
        for i in order
    ]


@st.composite
def logs(draw):
    """(planted log, fixed log): sessions of an agent; the planted log changes, request after
    request, the clock in the system prompt, the tool order or a tool description, slides its
    history window, or writes each session's user into the system prompt. The fixed log makes
    none of these changes: the first value stays (the same shapes, the same lengths)."""
    planted, fixed = [], []
    clock, reorder, drift, window, per_user = (draw(st.booleans()) for _ in range(5))
    minute = 0
    for session in range(draw(st.integers(1, 3))):
        messages = []
        who = f"Working for user{session} in /home/user{session}. " if per_user else ""
        same = "Working for user0 in /home/user0. " if per_user else ""
        for turn in range(draw(st.integers(1, 4))):
            minute += draw(st.integers(0, 7))
            messages.append({"role": "user", "content": draw(WORDS)})
            shown = f"{9 + minute // 60:02d}:{minute % 60:02d}" if clock else "09:00"
            order = [1, 0, 2] if reorder and draw(st.booleans()) else [0, 1, 2]
            count = 1200 + (minute if drift else 0)
            kept = messages[-3:] if window else messages
            for log, when, tools, history, prefix in (
                (planted, shown, _tools(order, count), kept, who),
                (fixed, "09:00" if clock else shown, _tools([0, 1, 2], 1200), messages, same),
            ):
                system = f"{prefix}You are a coding agent. Local time: {when}. Be brief."
                body = {
                    "messages": [{"role": "system", "content": system}, *history],
                    "tools": tools,
                    "session_id": f"s{session}",
                }
                log.append(json.loads(json.dumps(body)))
            messages.append({"role": "assistant", "content": f"done with turn {turn}"})
    return planted, fixed


def _write(tmp_path, name: str, log: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(body) + "\n" for body in log))
    return path


def _replayed(path) -> tuple[int, int]:
    """(prompt tokens, hit tokens) of `replay --simulate` (unlimited, serial)."""
    trace = read_trace(path, settings=Settings(tokenizer=TOKENIZER))
    result = simulate(trace, SimulationOptions(policy="vllm", block_size=16))
    return result.query_tokens, result.hit_tokens


def _replayed_hits(path) -> int:
    return _replayed(path)[1]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(generated=logs())
def test_costs_add_up_and_if_fixed_is_a_replay_bound(generated, tmp_path):
    planted, fixed = generated
    planted_path = _write(tmp_path, "planted.jsonl", planted)
    fixed_path = _write(tmp_path, "fixed.jsonl", fixed)
    written = tmp_path / "written.jsonl"
    options = LintOptions(settings=Settings(tokenizer=TOKENIZER), write_fixed=str(written))
    report = lint_paths([str(planted_path)], options)
    summary = report.summary
    assert summary.reusable_tokens == _replayed_hits(planted_path)
    charged = sum(row.tokens_reprefilled for row in summary.rules)
    assert charged == sum(d.tokens_reprefilled for d in report.diagnostics)
    assert charged + summary.unattributed_tokens == summary.prompt_tokens - summary.reusable_tokens
    assert summary.unattributed_tokens >= 0
    prompt_fixed, hits_fixed = _replayed(written)
    assert (prompt_fixed, hits_fixed) == (
        summary.prompt_tokens_if_fixed,
        summary.reusable_tokens_if_fixed,
    )
    saved = summary.reprefilled_tokens - (prompt_fixed - hits_fixed)
    assert charged == saved + summary.unpaid_tokens
    assert summary.reusable_tokens_if_fixed <= summary.prompt_tokens_if_fixed
    fixed_hits = _replayed_hits(fixed_path)
    clean = lint_paths([str(fixed_path)], LintOptions(settings=Settings(tokenizer=TOKENIZER)))
    # the fixed log keeps one constant time of day: a warning on its own, never a lost token
    charged_or_errors = [d for d in clean.diagnostics if d.code != "PC101" or d.tokens_reprefilled]
    assert not charged_or_errors, [(d.code, d.message) for d in charged_or_errors]
    assert clean.summary.reusable_tokens == clean.summary.reusable_tokens_if_fixed == fixed_hits
    assert clean.summary.requests_changed_if_fixed == 0
