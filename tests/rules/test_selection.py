"""Rule selection: longest prefix wins, command line beats configuration."""

from __future__ import annotations

import pytest

from pcache.errors import UsageError
from pcache.rules import RULES
from pcache.rules.selection import Selection, SelectionInput, resolve


@pytest.mark.parametrize(
    ("select", "ignore", "code", "selected"),
    [
        (("ALL",), (), "PC101", True),
        (("ALL",), ("PC1",), "PC101", False),
        (("PC1",), ("PC10",), "PC101", False),
        (("PC101",), ("PC1",), "PC101", True),
        (("PC1",), ("PC101",), "PC102", True),
        (("PC1",), ("PC1",), "PC101", False),
        (("PC2",), (), "PC101", False),
        (("ALL",), ("PC",), "PC510", False),
        (("PC5",), ("ALL",), "PC510", True),
    ],
)
def test_longest_prefix_wins(select, ignore, code, selected):
    assert Selection(select, ignore).is_selected(code) is selected


def test_cli_select_replaces_config_and_extends():
    config = SelectionInput(select=["PC1"], ignore=["PC101"])
    merged = resolve(config, SelectionInput(), RULES)
    assert merged.codes(RULES) == [
        "PC102",
        "PC103",
        "PC104",
        "PC105",
        "PC106",
        "PC107",
        "PC108",
        "PC109",
    ]
    cli = SelectionInput(select=["PC3"], extend_select=["PC402"], ignore=["PC304"])
    merged = resolve(config, cli, RULES)
    assert merged.codes(RULES) == ["PC301", "PC302", "PC303", "PC305", "PC402"]
    extended = resolve(config, SelectionInput(extend_select=["PC201"]), RULES)
    assert "PC201" in extended.codes(RULES) and "PC101" not in extended.codes(RULES)


def test_unknown_selector_is_a_usage_error():
    with pytest.raises(UsageError):
        resolve(SelectionInput(), SelectionInput(ignore=["PC9"]), RULES)


def test_the_default_set_and_explicit_selection():
    defaults = Selection()
    assert defaults.is_selected("PC101") and not defaults.is_explicit("PC101")
    assert not defaults.is_selected("PC510") and defaults.is_selected("PC000")
    extended = resolve(SelectionInput(), SelectionInput(extend_select=["PC510"]), RULES)
    assert extended.is_selected("PC510") and extended.is_explicit("PC510")
    assert extended.is_selected("PC301") and not extended.is_explicit("PC301")
    everything = resolve(SelectionInput(), SelectionInput(select=["ALL"]), RULES)
    assert all(everything.is_explicit(code) for code in RULES)
    ignored = resolve(SelectionInput(), SelectionInput(ignore=["PC1"]), RULES)
    assert not ignored.is_selected("PC101") and ignored.is_selected("PC201")
    configured = resolve(SelectionInput(extend_select=["PC5"]), SelectionInput(), RULES)
    assert configured.is_selected("PC510") and configured.is_selected("PC101")
