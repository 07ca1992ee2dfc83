"""Lint on logs shaped like a gateway's, cause by cause: what is found, what it is charged, and
what `replay --simulate` of the fixed log lint writes says it saves.

    python bench/lint_shared_logs.py                 # every cause x shape, default tokenizer
    python bench/lint_shared_logs.py --tokenizer o200k_base --seed 3

For each planted cause (`tests/rules/shared_logs.py`) and each shape (the planted sessions
alone; interleaved with clean sessions of the same app; interleaved with another app's), one
log is generated, linted with `--write-fixed`, and both logs are replayed: the row shows the
codes found on the planted and on the clean sessions (errors and warnings), the tokens the
planted code is charged, the saving of the fixed log (re-prefilled as is minus fixed), and the
rule `pcache diff` names for the first finding on a request that has a session predecessor,
against that predecessor (per-user data: against another user's planted request). Then the
issue's own cases: a request id in another session's prompt between two requests of a session
that reorders its tools; 40 sessions with one date; 30 sessions of seven tools in a
per-session order; per-user profiles before the tools.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pcache  # noqa: E402
from pcache.pipeline import Settings  # noqa: E402
from pcache.replayer.simulate.driver import SimulationOptions, simulate  # noqa: E402
from pcache.rules.runner import LintOptions, lint_paths  # noqa: E402
from pcache.traces.readers import read_trace  # noqa: E402
from tests.rules.shared_logs import PLANTED, SHAPES, TRAVEL, TRAVEL_TOOLS, build  # noqa: E402

LOUD = ("error", "warning")


def reprefilled(path: Path, tokenizer: str) -> tuple[int, int]:
    """(prompt tokens, re-prefilled tokens) of `replay --simulate` (unlimited, serial)."""
    trace = read_trace(path, settings=Settings(tokenizer=tokenizer))
    result = simulate(trace, SimulationOptions(policy="vllm", block_size=16))
    return result.query_tokens, result.query_tokens - result.hit_tokens


def lint(bodies: list[dict], tokenizer: str, folder: Path, name: str):
    log, fixed = folder / f"{name}.jsonl", folder / f"{name}.fixed.jsonl"
    log.write_text("".join(json.dumps(body) + "\n" for body in bodies))
    options = LintOptions(settings=Settings(tokenizer=tokenizer), write_fixed=str(fixed))
    report = lint_paths([str(log)], options)
    prompt, lost = reprefilled(log, tokenizer)
    prompt_fixed, lost_fixed = reprefilled(fixed, tokenizer)
    return report, lost - lost_fixed, (prompt, prompt_fixed)


def line_of(diagnostic) -> int | None:
    return int(diagnostic.request.rsplit(":", 1)[1]) if ":" in diagnostic.request else None


def cause_table(tokenizer: str, seed: int, folder: Path) -> None:
    print(
        "| cause | shape | want | found (planted) | on clean | charged | fixed log saves | diff |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for cause, code in PLANTED.items():
        for shape in SHAPES:
            bodies, labels = build(cause, shape, seed)
            report, saved, _ = lint(bodies, tokenizer, folder, f"{cause}-{shape}")
            planted, clean = set(), set()
            paired, partner = None, None  # the first finding with an earlier planted request
            for d in report.diagnostics:
                line = line_of(d)
                if line is None or d.severity not in LOUD:
                    continue
                if not labels[line - 1].startswith("p"):
                    clean.add(d.code)
                    continue
                planted.add(d.code)
                mine = labels[line - 1]
                same = [i for i in range(line - 1) if labels[i] == mine]
                other = [
                    i for i in range(line - 1) if labels[i].startswith("p") and labels[i] != mine
                ]
                if paired is None and (same or (cause == "per_user" and other)):
                    paired, partner = d, (same or other)[-1]
            charged = sum(t.tokens_reprefilled for t in report.summary.rules if t.code == code)
            rule = "-"
            if paired is not None:
                later = line_of(paired) - 1
                result = pcache.diff(bodies[partner], bodies[later], tokenizer=tokenizer)
                rule = result.cause.rule["code"] if result.cause.rule else result.cause.kind
            print(
                f"| {cause} | {shape} | {code} | {', '.join(sorted(planted)) or '-'} |"
                f" {', '.join(sorted(clean)) or '-'} | {charged:,} | {saved:,} | {rule} |"
            )


def tool(name: str, description: str) -> dict:
    parameters = {"type": "object", "properties": {"query": {"type": "string"}}}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def sessions(count: int, turns: int, system, tools, rng: random.Random) -> list[dict]:
    """`count` sessions of `turns` requests, one after the other, each repeating its history;
    `system(session)` and `tools(session)` give what a session sends."""
    bodies = []
    for session in range(count):
        history: list[dict] = []
        for turn in range(turns):
            question = {"role": "user", "content": f"Question {session}.{turn}: {rng.random()}"}
            messages = [{"role": "system", "content": system(session)}, *history, question]
            bodies.append({"messages": messages, "tools": tools(session)})
            history += [question, {"role": "assistant", "content": f"Answer {session}.{turn}"}]
    return bodies


def issue_cases(tokenizer: str, folder: Path) -> None:
    rng = random.Random(5)
    tools = [tool(name, text) for name, text in TRAVEL_TOOLS[:3]]
    system = {"role": "system", "content": TRAVEL}
    a1 = {
        "messages": [system, {"role": "user", "content": "Where is booking 4821?"}],
        "tools": tools,
    }
    a2 = {
        "messages": [
            *a1["messages"],
            {"role": "assistant", "content": "Let me look."},
            {"role": "user", "content": "And can I change it to Friday?"},
        ],
        "tools": [tools[2], tools[0], tools[1]],
    }
    b1 = {
        "messages": [
            {
                "role": "system",
                "content": f"{TRAVEL}\nRequest ID: {uuid.UUID(int=rng.getrandbits(128))}",
            },
            {"role": "user", "content": "Do you allow pets in the cabin?"},
        ],
        "tools": tools,
    }
    cases = {"A1, B1 (request id), A2 (tools reordered)": [a1, b1, a2]}
    cases["40 sessions x 3, one date"] = sessions(
        40, 3, lambda session: f"Today is 2026-11-30.\n{TRAVEL}", lambda session: tools, rng
    )
    seven = [
        tool(f"tool_{i}", f"Tool number {i} of the travel agent, with its rules.") for i in range(7)
    ]

    def shuffled(session: int) -> list[dict]:
        order = list(range(7))
        random.Random(session).shuffle(order)
        return [seven[i] for i in order]

    cases["30 sessions, 7 tools in a per-session order"] = sessions(
        30, 3, lambda session: TRAVEL, shuffled, rng
    )

    def profiled(session: int) -> str:
        plan = ["gold", "basic"][session % 2]
        return f"{TRAVEL}\n\n# Customer\nName: Customer {session}\nPlan: {plan}"

    cases["12 users, a profile before the tools"] = sessions(
        12, 2, profiled, lambda session: tools, rng
    )
    print("\n| log | findings (code: count, tokens) | fixed log saves | prompt as is / fixed |")
    print("|---|---|---|---|")
    for name, bodies in cases.items():
        report, saved, prompts = lint(bodies, tokenizer, folder, name.split(",")[0][:8])
        loud = {}
        for d in report.diagnostics:
            if d.severity in LOUD:
                count, tokens = loud.get(d.code, (0, 0))
                loud[d.code] = (count + 1, tokens + d.tokens_reprefilled)
        shown = "; ".join(f"{code}: {n}, {t:,}" for code, (n, t) in sorted(loud.items())) or "-"
        summary = report.summary
        assert summary.reusable_tokens_if_fixed <= summary.prompt_tokens_if_fixed
        print(f"| {name} | {shown} | {saved:,} | {prompts[0]:,} / {prompts[1]:,} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", default="gpt-oss")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print(f"tokenizer {args.tokenizer}, seed {args.seed}, block size 16, vllm profile\n")
        cause_table(args.tokenizer, args.seed, Path(folder))
        issue_cases(args.tokenizer, Path(folder))


if __name__ == "__main__":
    main()
