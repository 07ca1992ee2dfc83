"""Money in lint and report: the price table, which family prices a model, the arithmetic, and
the figures adding up (per rule, per group) in text, JSON and HTML."""

from __future__ import annotations

import math

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pcache
from pcache.cache.prices import Price, PriceBook, family_price, match, parse_prices, table
from pcache.cache.profiles import load_profile, profile_data
from pcache.errors import ConfigError, OptionError
from tests.conftest import run_pcache
from tests.fixtures.gateway_log import gateway_log

# -- the table and the matching ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4.1-mini", "gpt-4.1-mini"),
        ("gpt-5-chat-latest", None),  # a variant, not a version: no price guessed
        ("gpt-5.1-2025-11-13", "gpt-5.1"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", "claude-sonnet-4"),
        ("anthropic.claude-3-7-sonnet-20250219-v1:0", "claude-3-7-sonnet"),
        ("claude-3-5-sonnet-v2@20241022", "claude-3-5-sonnet"),
        ("gemini-2.5-flash-preview-09-2025", "gemini-2.5-flash"),
        ("gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
        ("DeepSeek-Chat", "deepseek-chat"),
        ("o3-pro", None),
        ("o3-mini", "o3-mini"),
        ("gpt-oss-120b", None),
        ("claude-opus-4-6", None),
        ("", None),
        (None, None),
    ],
)
def test_a_model_is_priced_by_its_longest_family(model, family):
    found = match(model, table())
    assert (found.family if found else None) == family


def test_every_price_names_its_source_and_date():
    for price in table().values():
        assert price.source.startswith("https://"), price
        assert price.as_of[:4].isdigit(), price
        assert 0 < price.cached_input < price.input, price
        if price.cache_write is not None:  # Anthropic's 5-minute writes: 1.25x input (Haiku 3's
            assert price.cache_write == pytest.approx(1.25 * price.input, rel=0.05), price  # $0.30)


def test_profiles_take_their_prices_from_the_table():
    """One table: providers.json names a family, never a price."""
    for name, entry in profile_data()["profiles"].items():
        assert not {"input_price_per_mtok", "cached_read_multiplier"} & entry.keys(), name
        profile = load_profile(name)
        if entry["kind"] == "engine":
            assert profile.input_price_per_mtok == 0.0
            continue
        price = family_price(profile.price_family)
        assert profile.input_price_per_mtok == price.input
        assert profile.input_price_per_mtok * profile.cached_read_multiplier == pytest.approx(
            price.cached_input
        )
        assert profile.input_price_per_mtok * profile.cache_write_multiplier == pytest.approx(
            price.miss
        )


def test_replay_bills_at_the_profiles_family(tmp_path):
    report = pcache.replay("samples/traces/requests_tiny.jsonl", mode="simulate", policy="openai")
    bill = report.reports[0].bill
    assert bill.price_per_mtok == family_price("gpt-5").input
    assert bill.cached_read_multiplier == 0.1 and bill.cache_write_multiplier == 1.0


# -- the arithmetic ----------------------------------------------------------------------------


def test_cost_of_hits_misses_and_writes():
    openai = Price("x", input=2.0, cached_input=0.5)
    assert openai.cost(1_000_000, 250_000) == pytest.approx(0.25 * 0.5 + 0.75 * 2.0)
    anthropic = Price("y", input=3.0, cached_input=0.3, cache_write=3.75)
    assert anthropic.cost(2_000_000, 1_000_000) == pytest.approx(0.3 + 3.75)


@given(
    prompt=st.integers(0, 10**9),
    share=st.floats(0, 1),
    price=st.builds(
        Price,
        st.just("f"),
        st.floats(0, 100),
        st.floats(0, 100),
        st.one_of(st.none(), st.floats(0, 100)),
    ),
)
def test_cost_is_hits_plus_misses(prompt, share, price):
    cached = int(prompt * share)
    whole = price.cost(prompt, cached)
    apart = price.cost(cached, cached) + price.cost(prompt - cached, 0)
    assert math.isclose(whole, apart, rel_tol=1e-9, abs_tol=1e-12)


# -- resolution and configuration -------------------------------------------------------------


def test_price_book_forced_custom_and_missing():
    custom = parse_prices({"acme-70b": {"input": 0.9, "cached_input": 0.09}}, "pyproject.toml")
    book = PriceBook(custom)
    assert book.of("acme-70b-2026-01-02").family == "acme-70b"
    assert book.of("gpt-4o").family == "gpt-4o"
    assert book.of("mystery") is None and book.of(None) is None and book.of("mystery") is None
    assert book.missing == {"mystery": 2, "": 1}
    forced = PriceBook(custom, "gpt-4.1-2025-04-14")
    assert forced.of("mystery").family == "gpt-4.1" and not forced.missing
    with pytest.raises(OptionError, match=r"--price 'gpt-9': no family"):
        PriceBook({}, "gpt-9")


@pytest.mark.parametrize(
    ("table_value", "message"),
    [
        ("cheap", "must be a table of MODEL"),
        ({"m": 1}, "m must be a table"),
        ({"m": {"input": 1}}, "m: cached_input is missing"),
        ({"m": {"input": 1, "cached_input": -1}}, "m.cached_input must be a finite number >= 0"),
        ({"m": {"input": True, "cached_input": 1}}, "m.input must be a number"),
        ({"m": {"input": 1, "cached_input": 1, "output": 2}}, "unknown key(s) output"),
    ],
)
def test_bad_price_tables(table_value, message):
    with pytest.raises(ConfigError) as error:
        parse_prices(table_value, "pyproject.toml: [tool.pcache.prices]")
    assert message in str(error.value) and "\n" not in str(error.value)


# -- lint: the figures add up --------------------------------------------------------------------

KEYS = ("model", "user", "metadata.tenant")


def _write(path, seed: int, conversations: int = 6) -> None:
    lines = gateway_log(seed, conversations=conversations, turns=3)
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 2e-6  # each figure is rounded to 6 places


@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 1000),
    key=st.sampled_from(KEYS),
    profile=st.sampled_from(["vllm", "openai", "anthropic"]),
)
def test_money_adds_up(tmp_path, seed, key, profile):
    """Per model the cost is its tokens at its prices; the groups add up to the whole; the
    rules' savings add up to the fixes' saving and `unpaid`."""
    path = tmp_path / f"log-{seed}.jsonl"
    _write(path, seed)
    by_model = pcache.lint([str(path)], select=["ALL"], group_by=["model"], profile=profile)
    summary = by_model.summary.as_dict()
    money = summary["money"]
    assert money["shown"] and money["per_month"] is not None
    expected = expected_fixed = 0.0
    for row in summary["groups"]["rows"]:
        price = family_price(match(row["key"]["model"], table()).family)
        cost = price.cost(row["prompt_tokens"], row["reusable_tokens"])
        fixed = price.cost(row["if_fixed"]["prompt_tokens"], row["if_fixed"]["reusable_tokens"])
        assert _close(row["money"]["cost"], cost) and _close(row["money"]["cost_if_fixed"], fixed)
        expected, expected_fixed = expected + cost, expected_fixed + fixed
    assert _close(money["cost"], expected) and _close(money["cost_if_fixed"], expected_fixed)
    rules = sum(rule["saving"] for rule in money["rules"])
    assert abs(rules - money["unpaid"] - money["saving"]) <= 1e-5
    day = by_model.summary.money.total.cost * 86400 / money["span_seconds"]
    assert math.isclose(money["per_day"]["cost"], day, rel_tol=1e-6, abs_tol=1e-6)
    month = money["per_month"]["saving"] / 30
    assert math.isclose(money["per_day"]["saving"], month, rel_tol=1e-4, abs_tol=1e-6)
    grouped = pcache.lint([str(path)], select=["ALL"], group_by=[key], profile=profile)
    totals = grouped.summary.as_dict()
    rows = totals["groups"]["rows"]
    for figure in ("cost", "cost_if_fixed", "saving"):
        assert abs(sum(row["money"][figure] for row in rows) - money[figure]) <= 1e-5, figure
    for rule in money["rules"]:
        parts = [
            r["saving"] for row in rows for r in row["money"]["rules"] if r["code"] == rule["code"]
        ]
        assert abs(sum(parts) - rule["saving"]) <= 1e-5, rule


def test_per_rule_savings_reach_the_text(tmp_path):
    path = tmp_path / "log.jsonl"
    _write(path, 3)
    done = run_pcache("lint", path, "--group-by", "model")
    text = done.stdout.decode()
    assert done.returncode == 1, done.stderr.decode()
    assert "Input cost at gpt-4o ($2.50 input, $1.25 cached per million tokens, as of" in text
    assert "the fixes save $" in text and "At the log's rate (" in text
    assert "saves $" in text  # the rule totals' column
    assert "model=gpt-4.1" in text and "as is, the fixes save $" in text


# -- what is not priced ------------------------------------------------------------------------


def _log(tmp_path, model: str | None, timestamps: bool = True):
    path = tmp_path / "log.jsonl"
    lines = gateway_log(2, conversations=3, turns=2)
    for line in lines:
        if model is None:
            line["body"].pop("model", None)
        else:
            line["body"]["model"] = model
        if not timestamps:
            line.pop("timestamp", None)
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    return path


def test_an_unknown_model_is_not_priced(tmp_path):
    path = _log(tmp_path, "acme-70b")
    done = run_pcache("lint", path)
    text = done.stdout.decode()
    assert "Input cost not shown: no price for acme-70b (6 requests); --price MODEL" in text
    assert "saves $" not in text and "$" not in text.split("Input cost not shown")[0]
    data = orjson.loads(run_pcache("lint", path, "-f", "json").stdout)["summary"]["money"]
    assert data["shown"] is False and data["cost"] is None and data["rules"] == []
    assert data["missing_prices"] == [{"model": "acme-70b", "requests": 6}]


def test_price_flag_and_config(tmp_path):
    path = _log(tmp_path, "acme-70b")
    forced = orjson.loads(run_pcache("lint", path, "--price", "gpt-4o", "-f", "json").stdout)
    assert forced["summary"]["money"]["forced"] == "gpt-4o"
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pcache.prices]\n"acme-70b" = {input = 0.9, cached_input = 0.09}\n'
    )
    done = run_pcache("lint", "log.jsonl", "-f", "json", cwd=tmp_path)
    money = orjson.loads(done.stdout)["summary"]["money"]
    assert money["prices"][0]["family"] == "acme-70b" and money["prices"][0]["input"] == 0.9
    summary = orjson.loads(done.stdout)["summary"]
    expected = (0.09 * summary["reusable_tokens"] + 0.9 * summary["reprefilled_tokens"]) / 1e6
    assert money["cost"] == pytest.approx(expected, abs=1e-6)
    text = run_pcache("lint", "log.jsonl", cwd=tmp_path).stdout.decode()
    assert "acme-70b ($0.90 input, $0.09 cached per million tokens, [tool.pcache.prices])" in text


def test_no_timestamps_no_rate(tmp_path):
    path = _log(tmp_path, "gpt-4o", timestamps=False)
    text = run_pcache("lint", path).stdout.decode()
    assert "No rate per day or month: some request has no timestamp." in text
    money = orjson.loads(run_pcache("lint", path, "-f", "json").stdout)["summary"]["money"]
    assert money["per_day"] is None and money["per_month"] is None
    assert all(rule["saving_per_month"] is None for rule in money["rules"])


def test_a_log_without_model_names_needs_a_price(tmp_path):
    path = _log(tmp_path, None)
    assert "no price for (no model named)" in run_pcache("lint", path).stdout.decode()
    text = run_pcache("lint", path, "--price", "claude-sonnet-4").stdout.decode()
    assert "claude-sonnet-4 ($3.00 input, $0.30 cached, $3.75 cache write" in text
    assert "for every request (--price)" in text


@pytest.mark.parametrize(
    ("arguments", "config", "message"),
    [
        (("--price", "gpt-9"), None, "--price 'gpt-9': no family of pcache/data/prices.json"),
        ((), '[tool.pcache.prices]\nm = {input = "cheap", cached_input = 1}\n', "m.input must"),
        ((), "[tool.pcache.prices]\nm = 3\n", "[tool.pcache.prices] m must be a table"),
    ],
)
def test_bad_prices_exit_2(tmp_path, arguments, config, message):
    path = _log(tmp_path, "gpt-4o")
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(config)
    for command in ("lint", "report"):
        output = () if command == "lint" else ("-o", str(tmp_path / "r.html"))
        done = run_pcache(command, path.name, *arguments, *output, cwd=tmp_path)
        error = done.stderr.decode()
        assert done.returncode == 2, (command, error)
        assert message in error and error.count("\n") == 1 and "Traceback" not in error
        if config is not None:
            assert "pyproject.toml" in error


def test_api_prices_requests_in_memory():
    lines = gateway_log(4, conversations=2, turns=2)
    report = pcache.lint([line["body"] for line in lines], price="gpt-5-mini")
    money = report.summary.money
    assert money.forced == "gpt-5-mini" and money.total is not None
    assert money.total.cost == pytest.approx(
        family_price("gpt-5-mini").cost(
            report.summary.prompt_tokens, report.summary.reusable_tokens
        )
    )
    with pytest.raises(pcache.InputError, match="price"):
        pcache.lint([lines[0]["body"]], price=3)


# -- the report ------------------------------------------------------------------------------


def test_report_shows_the_money(tmp_path):
    path = tmp_path / "log.jsonl"
    _write(path, 7)
    page = tmp_path / "report.html"
    done = run_pcache("report", path, "--group-by", "model", "--redact", "-o", page)
    assert done.returncode == 0, done.stderr.decode()
    html = page.read_text()
    assert 'data-figure="cost"' in html and 'data-figure="saving_per_month"' in html
    assert "its fix saves <span data-saving=" in html and '<th class="num">fixes save</th>' in html
    assert "Input cost at gpt-4" in html
    done = run_pcache("report", path, "--format", "json", "-o", "-")
    lint = orjson.loads(done.stdout)["lint"]["summary"]
    direct = orjson.loads(run_pcache("lint", path, "-f", "json").stdout)["summary"]
    assert lint["money"] == direct["money"]


def test_redacted_money_quotes_no_request(tmp_path):
    path = tmp_path / "log.jsonl"
    _write(path, 5)
    done = run_pcache("lint", path, "--group-by", "user", "--redact", "-f", "json")
    assert "@" not in done.stdout.decode()
    rows = orjson.loads(done.stdout)["summary"]["groups"]["rows"]
    assert all("money" in row for row in rows)
