"""What lint holds is bounded by mechanisms, not by the log's length: the cache forgets prefixes
no request used for the profile's longest lifetime, idle sessions close, findings past
`KEEP_FINDINGS` are counted but not listed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import pcache
from pcache.cache.profiles import longest_ttl_seconds
from pcache.cache.reuse import PrefixIndex
from pcache.rules import runner
from pcache.text.prefix import common_prefix_length

HOUR_MS = 3_600_000.0


def test_the_longest_lifetimes_are_the_data_files():
    assert longest_ttl_seconds("openai") == 86_400  # 24h retention
    assert longest_ttl_seconds("anthropic") == 3_600  # 1h cache_control ttl
    assert longest_ttl_seconds("bedrock") == 3_600
    assert longest_ttl_seconds("vllm") is None


def test_a_prefix_unused_for_the_lifetime_is_forgotten_and_a_used_one_kept():
    index = PrefixIndex(4, lifetime_ms=1000.0)
    shared, own = list(range(8)), [50, 51, 52, 53, 54]
    index.insert(index.match(shared + own), now=0.0)
    index.insert(index.match([*shared, 60, 61, 62, 63, 64]), now=900.0)
    index.expire(1500.0)
    index.check_integrity()
    assert index.match(shared + own).length == 8 + 0  # the shared part was used at 900
    index.expire(2000.0)
    index.check_integrity()
    assert index.match(shared + own).length == 0
    assert not index.blocks and not index.children and not index.holders and not index.touched


def test_without_timestamps_nothing_expires():
    index = PrefixIndex(4, lifetime_ms=1000.0)
    index.insert(index.match(list(range(10))))
    assert index.expire(10**9) == 0
    assert index.match(list(range(10))).length == 10


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(0, 2), min_size=1, max_size=14),
            st.integers(0, 400),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_expiring_index_against_the_prompts_of_one_lifetime(steps):
    """Never more than some prompt of the last lifetime shares, never fewer full blocks."""
    size, lifetime = 3, 500.0
    index = PrefixIndex(size, lifetime_ms=lifetime)
    seen: list[tuple[list[int], float]] = []
    now = 0.0
    for tokens, gap in steps:
        now += gap
        index.expire(now)
        found = index.match(tokens).length
        window = [common_prefix_length(tokens, old) for old, at in seen if at >= now - lifetime]
        best = max(window, default=0)
        assert found <= best
        assert found >= (best // size) * size
        index.insert(index.match(tokens), now)
        index.check_integrity()
        seen.append((tokens, now))


def _turn(session: str, hours: float, turns: int) -> dict:
    system = "You are the support assistant of ACME. " * 40
    messages = [{"role": "system", "content": system}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"Question {turn}?"})
        if turn < turns - 1:
            messages.append({"role": "assistant", "content": f"Answer {turn}."})
    return {"session_id": session, "timestamp": hours * HOUR_MS, "body": {"messages": messages}}


def test_a_session_idle_past_the_longest_lifetime_starts_again():
    def lint(gap_hours: float):
        values = [_turn("s1", 0, 1), _turn("s1", gap_hours, 2)]
        return pcache.lint(values, profile="deepseek", tokenizer="o200k_base").summary

    within, past = lint(0.5), lint(1.5)
    assert within.sessions == 1 and within.reusable_tokens > 0
    assert past.sessions == 2 and past.reusable_tokens == 0
    assert past.unattributed["new_content"] > within.unattributed["new_content"]


def test_findings_past_the_bound_are_counted_not_listed(monkeypatch):
    def lint():
        return pcache.lint(["samples/prompts"], select=["ALL"], tokenizer="o200k_base")

    full = lint()
    assert len(full.diagnostics) > 3
    monkeypatch.setattr(runner, "KEEP_FINDINGS", 3)
    cut = lint()
    assert len(cut.diagnostics) == 3
    assert cut.summary.findings_not_listed == len(full.diagnostics) - 3
    totals = [(t.code, t.count, t.tokens_reprefilled) for t in full.summary.rules]
    assert [(t.code, t.count, t.tokens_reprefilled) for t in cut.summary.rules] == totals
    assert cut.failing == full.failing
    assert cut.summary.as_dict()["findings_not_listed"] == cut.summary.findings_not_listed
    assert "findings_not_listed" not in full.summary.as_dict()
