"""docs/pricing.md's worked example: pcache prints the lines the page shows, and the page's
arithmetic (its token counts times gpt-4.1's prices) gives pcache's figures."""

from __future__ import annotations

import re
import shlex

import orjson
import pytest

from pcache.cache.prices import family_price
from tests.conftest import ROOT, run_pcache

PAGE = (ROOT / "docs" / "pricing.md").read_text()
EXAMPLE = PAGE.split("## A worked example", 1)[1].split("\n## ", 1)[0]
COMMAND = re.search(r"^\$ (pcache .+)$", EXAMPLE, flags=re.MULTILINE).group(1)
SHOWN = re.search(r"^```text\n(.*?)^```", EXAMPLE, flags=re.MULTILINE | re.DOTALL).group(1)
TABLE = {
    row.split("|")[1].strip(): (row.split("|")[2].strip(), row.split("|")[3].strip())
    for row in EXAMPLE.splitlines()
    if row.startswith("| ") and not row.startswith("| figure")
}


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def printed() -> str:
    done = run_pcache(*shlex.split(COMMAND)[1:])
    assert done.returncode == 1, done.stderr.decode()  # findings
    return _words(done.stdout.decode())


@pytest.fixture(scope="module")
def summary() -> dict:
    done = run_pcache(*shlex.split(COMMAND)[1:], "--format", "json")
    return orjson.loads(done.stdout)["summary"]


def test_the_page_shows_what_pcache_prints(printed):
    for line in SHOWN.strip().splitlines():
        assert _words(line) in printed, line


def test_the_arithmetic_by_hand(summary):
    price = family_price("gpt-4.1")
    hit, miss = price.cached_input, price.input
    assert (hit, miss) == (0.50, 2.00) and summary["money"]["prices"][0]["family"] == "gpt-4.1"
    prompt, reused = summary["prompt_tokens"], summary["reusable_tokens"]
    fixed = summary["if_fixed"]
    rule = summary["rules"][0]
    added = fixed["prompt_tokens"] - prompt
    missed_fixed = fixed["prompt_tokens"] - fixed["reusable_tokens"]
    assert reused == 0 and rule["code"] == "PC101"

    as_is = prompt * miss / 1e6
    if_fixed = (fixed["reusable_tokens"] * hit + missed_fixed * miss) / 1e6
    saving = as_is - if_fixed
    rule_saving = (rule["tokens_reprefilled"] * (miss - hit) - added * hit) / 1e6
    span_days = summary["money"]["span_seconds"] / 86400
    assert span_days == pytest.approx(1 / 48)  # 30 minutes
    expected = {
        "as is": (f"{prompt:,} missed x $2.00", as_is, 6),
        "if fixed": (
            f"{fixed['reusable_tokens']:,} cached x $0.50 + {missed_fixed:,} missed x $2.00",
            if_fixed,
            6,
        ),
        "the fixes save": ("", saving, 6),
        "PC101's fix saves": (
            f"{rule['tokens_reprefilled']:,} x ($2.00 - $0.50) - {added:,} added x $0.50",
            rule_saving,
            6,
        ),
        "a day as is": ("x 48", as_is * 48, 4),
        "a month saved": ("x 48 x 30", saving * 48 * 30, 2),
    }
    money = summary["money"]
    assert money["cost"] == pytest.approx(as_is, abs=1e-9)
    assert money["cost_if_fixed"] == pytest.approx(if_fixed, abs=1e-9)
    assert money["rules"][0]["saving"] == pytest.approx(rule_saving, abs=1e-9)
    assert money["saving"] == pytest.approx(rule_saving, abs=1e-9)  # one rule: all of it
    assert money["per_day"]["cost"] == pytest.approx(as_is * 48, abs=1e-6)
    assert money["per_month"]["saving"] == pytest.approx(saving * 1440, abs=1e-6)
    for figure, (work, value, places) in expected.items():
        shown_work, shown_value = TABLE[figure]
        assert work in shown_work, (figure, shown_work)
        assert shown_value == f"${value:,.{places}f}", (figure, shown_value)
