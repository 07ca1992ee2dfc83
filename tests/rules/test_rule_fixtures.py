"""Every rule's fixture cases (tests/rules/fixtures/PCNNN.json), each run with only that rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcache.pipeline import Settings
from pcache.rules import REGISTRY
from pcache.rules.runner import LintOptions, lint_values
from pcache.rules.selection import Selection
from tests.rules.dated_renderer import DatedRenderer

FIXTURES = Path(__file__).parent / "fixtures"


def _cases():
    for path in sorted(FIXTURES.glob("PC*.json")):
        data = json.loads(path.read_text())
        for case in data["cases"]:
            name = f"{data['rule']}:{case['name']}"
            yield pytest.param(data["rule"], data["settings"], case, id=name)


def lint_case(code: str, settings: dict, case: dict):
    renderer = DatedRenderer() if case.get("renderer") == "dated" else None
    tokenizer = case.get("tokenizer", settings["tokenizer"])
    if tokenizer.startswith("hf:"):  # a real Hugging Face model dir built for the tests
        from tests.fixtures import hf_model_dir

        tokenizer = str(hf_model_dir(tokenizer[3:]))
    options = LintOptions(
        settings=Settings(tokenizer=tokenizer, profile=case.get("profile", settings["profile"])),
        selection=Selection((code,)),
        renderer=renderer,
        template_chosen=True,
    )
    return lint_values(case["requests"], options, source="case.jsonl")


def test_every_rule_has_fixtures_with_pass_and_fail_cases():
    for module in REGISTRY:
        path = FIXTURES / f"{module.RULE.code}.json"
        assert path.exists(), f"{module.RULE.code} has no fixture file"
        cases = json.loads(path.read_text())["cases"]
        assert any(case["expect"] for case in cases), f"{module.RULE.code}: no failing case"
        assert any(not case["expect"] for case in cases), f"{module.RULE.code}: no passing case"


def test_the_registry_finds_every_rule_in_code_order():
    codes = [module.RULE.code for module in REGISTRY]
    assert codes == sorted(set(codes))
    assert set(codes) == {path.stem for path in FIXTURES.glob("PC*.json")}


@pytest.mark.parametrize(("code", "settings", "case"), list(_cases()))
def test_fixture_case(code, settings, case):
    report = lint_case(code, settings, case)
    found = [d for d in report.diagnostics if d.code == code]
    assert len(found) == len(report.diagnostics)
    summary = [(d.request, d.severity, d.json_path, d.message) for d in found]
    assert len(found) == len(case["expect"]), summary
    for diagnostic, expected in zip(found, case["expect"], strict=True):
        for key, value in expected.items():
            assert getattr(diagnostic, key) == value, (key, summary)
        assert diagnostic.tokens_reprefilled >= 0
        assert diagnostic.token_position is None or diagnostic.token_position >= 0
