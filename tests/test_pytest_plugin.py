"""The pytest plugin, run by pytest itself (pytester): a passing and a failing SDK test."""

from __future__ import annotations

import sys

from tests.conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

pytest_plugins = ["pytester"]

# The plugin by module name; `no:pcache` keeps an installed entry point from loading it twice.
PLUGIN_ARGS = ("-p", "no:pcache", "-p", "pcache.record.pytest_plugin", "-p", "no:cacheprovider")

AGENT_TESTS = """
import itertools

from openai import OpenAI

from pcache.record import assert_cacheable, assert_prefix_stable
from pcache.record.canned import chat_completion

SYSTEM = "You answer questions about parcels for a delivery company. Be brief. " * 12
SECONDS = itertools.count(2, 7)


def chat(client, system):
    history = []
    for turn in ("Where is P-42?", "When will it arrive?", "Thanks"):
        history.append({"role": "user", "content": turn})
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "system", "content": system()}, *history]
        )
        history.append(reply.choices[0].message.model_dump(exclude_none=True))


def replies(recorder):
    recorder.respond(chat_completion("Out for delivery."), chat_completion("At 14:00."),
                     chat_completion("You are welcome."))


def test_static_system_prompt(pcache_recorder):
    replies(pcache_recorder)
    client = OpenAI(api_key="test", http_client=pcache_recorder.client())
    chat(client, lambda: SYSTEM)
    assert len(pcache_recorder.requests) == 3
    assert_prefix_stable(pcache_recorder.requests)
    assert assert_cacheable(pcache_recorder.requests, min_ratio=0.6) >= 0.6


def test_clock_in_system_prompt(pcache_recorder):
    replies(pcache_recorder)
    client = OpenAI(api_key="test", http_client=pcache_recorder.client())
    chat(client, lambda: f"{SYSTEM}Now: 2026-03-02 10:16:{next(SECONDS):02d} UTC.")
    assert_prefix_stable(pcache_recorder.requests)
"""


def test_a_passing_and_a_failing_agent_test(pytester):
    pytester.makepyfile(test_agent=AGENT_TESTS)
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(passed=1, failed=1)
    output = result.stdout.str()
    assert "test_clock_in_system_prompt" in output
    assert "requests[0] -> requests[1]: the cached prefix breaks" in output
    assert "cause: clock — a clock value changed" in output
    assert "at: messages[0].content" in output
    assert "token: " in output


def test_assert_cacheable_fails_below_its_threshold(pytester):
    pytester.makepyfile(
        test_ratio="""
from pcache.record import assert_cacheable

def test_unrelated_prompts():
    requests = [{"messages": [{"role": "user", "content": f"question {n} " * 40}]}
                for n in ("one", "two")]
    assert_cacheable(requests, min_ratio=0.9)
"""
    )
    result = pytester.runpytest(*PLUGIN_ARGS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cacheable tokens (vllm, gpt-oss): *below 90.0%*"])


def test_the_fixture_is_declared_as_a_pytest11_entry_point():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"pcache": "pcache.record.pytest_plugin"}
    from pcache.record import pytest_plugin

    assert callable(pytest_plugin.pcache_recorder)
