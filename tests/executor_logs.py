"""Logs for the executor tests: request traces whose every line kind crosses shard borders."""

from __future__ import annotations

import json
import random
from pathlib import Path

SHAPES = Path(__file__).resolve().parent / "data" / "shapes"
WORDS = ("cache", "prefix", "token", "block", "café", "日本語", "😀", "<|eot_id|>", "42", "3.14")


def request_log(path: Path, requests: int = 240, seed: int = 5, chain: bool = True) -> Path:
    """Sessions that grow, single-turn requests sharing a system prompt, timestamps out of
    order now and then, text prompts, token-id prompts, a request the template refuses, lines
    that are not JSON and a Responses conversation (one request continuing another)."""
    rng = random.Random(seed)

    def words(count: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(count))

    system = {"role": "system", "content": words(300)}
    lines: list[str] = []
    history = [system]
    for number in range(requests):
        stamp = number * 100 - (250 if number % 37 == 5 else 0)
        if number % 4 == 0:
            history = [*history, {"role": "user", "content": words(rng.randint(5, 120))}]
            body = {"messages": list(history), "session_id": "grow"}
            history.append({"role": "assistant", "content": words(rng.randint(5, 40))})
            if len(history) > 15:
                history = [system]
        elif number % 4 == 1:
            body = {"messages": [system, {"role": "user", "content": f"{number} {words(80)}"}]}
        elif number % 4 == 2:
            body = {"prompt": words(rng.randint(10, 200)), "session_id": f"p{number % 3}"}
        else:
            body = {"token_ids": [rng.randrange(1000) for _ in range(rng.randint(1, 90))]}
        lines.append(json.dumps({**body, "timestamp": stamp, "output_length": number % 17}))
        if number % 61 == 30:
            lines.append("{not json")
        if number % 83 == 40:
            lines.append(json.dumps({"messages": [{"role": "assistant", "content": "no user"}]}))
        if number % 97 == 50:
            lines.append("")
    if chain:
        conversation = (SHAPES / "responses.jsonl").read_text(encoding="utf-8").splitlines()
        lines[len(lines) // 2 : len(lines) // 2] = conversation
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
