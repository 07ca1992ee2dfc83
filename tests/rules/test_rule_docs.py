"""Rule documentation: fixed shape, and its Example fires while its Use-instead stays silent."""

from __future__ import annotations

import json
import re

import pytest

from pcache.pipeline import Settings
from pcache.rules import REGISTRY
from pcache.rules.runner import LintOptions, lint_values
from pcache.rules.selection import Selection
from tests.rules.dated_renderer import DatedRenderer

SECTIONS = ("## What it does", "## Why is this bad?", "## Example", "Use instead:")
BLOCK = re.compile(r"```json\n(.*?)```(.*?)(?=```json|\n## |\Z)", re.S)


def _block_after(doc: str, heading: str) -> tuple[list, dict]:
    match = BLOCK.search(doc, doc.index(heading))
    assert match, f"no ```json block after {heading!r}"
    value = json.loads(match.group(1))
    note = match.group(2)
    settings = {"tokenizer": "o200k_base", "profile": "vllm"}
    for key in ("tokenizer", "profile"):
        found = re.search(rf"--{key} (\w+)", note)
        if found:
            settings[key] = found.group(1)
    return (value if isinstance(value, list) else [value]), settings


def _lint(code: str, requests: list, settings: dict, renderer=None):
    options = LintOptions(
        settings=Settings(tokenizer=settings["tokenizer"], profile=settings["profile"]),
        selection=Selection((code,)),
        renderer=renderer,
        template_chosen=True,
    )
    return lint_values(requests, options, source="doc.jsonl").diagnostics


@pytest.mark.parametrize("module", REGISTRY, ids=lambda m: m.RULE.code)
def test_docstring_shape(module):
    doc = module.__doc__
    positions = [doc.find(section) for section in SECTIONS]
    assert all(p >= 0 for p in positions), f"{module.RULE.code} lacks a section"
    assert positions == sorted(positions), f"{module.RULE.code}: sections out of order"
    assert module.__name__.rsplit(".", 1)[1] == (
        f"pc{module.RULE.code[2:]}_{module.RULE.name.replace('-', '_')}"
    )


@pytest.mark.parametrize("module", REGISTRY, ids=lambda m: m.RULE.code)
def test_example_fires_and_use_instead_is_silent(module):
    code = module.RULE.code
    example, example_settings = _block_after(module.__doc__, "## Example")
    better, better_settings = _block_after(module.__doc__, "Use instead:")
    renderer = DatedRenderer() if code == "PC102" else None
    if code == "PC506":  # the doc shows a shortened system prompt; repeat it past the minimum
        for request in example + better:
            request["system"] = request["system"] * 100
    fired = _lint(code, example, example_settings, renderer)
    assert fired, f"{code}: the Example does not fire"
    assert not _lint(code, better, better_settings), f"{code}: Use instead fires"


@pytest.mark.parametrize("module", REGISTRY, ids=lambda m: m.RULE.code)
def test_the_doc_says_when_a_rule_is_opt_in(module):
    says = "Opt-in (`--extend-select" in module.__doc__.split("## Why is this bad?")[0]
    assert says is not module.RULE.default, module.RULE.code
