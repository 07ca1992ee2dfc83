"""The traces the vLLM suite replays: chat, multi-turn, text prompts and token ids.

Each shares prefixes longer than vLLM's 32-token blocks, repeats a request exactly, and has one
request that shares nothing, so that its cached tokens cover whole blocks, partial blocks and
none. The token-id trace has a prompt of exactly two blocks sent twice: vLLM recomputes the
last token, so the repeat hits one block, not two.
"""

from __future__ import annotations

import json
from pathlib import Path

SYSTEM = (
    "You are the support assistant of a small bookshop in Lisbon. Answer in two sentences at"
    " most, be kind, never invent a title, and when a customer asks for a recommendation,"
    " name one book and say why it fits. The shop opens at nine and closes at seven, it"
    " ships to Portugal and Spain only, and gift wrapping is free in December."
)
QUESTIONS = (
    "Do you have any novels by José Saramago in English?",
    "Can you ship a parcel to Madrid before Christmas?",
    "What would you recommend to someone who loved The Name of the Rose?",
)
ANSWERS = (
    "Yes: Blindness and The Year of the Death of Ricardo Reis are on the shelf.",
    "Yes, parcels to Madrid take three working days, so order by the 20th.",
)
PREFACE = (
    "The following is a transcript of a radio programme about the history of printing in"
    " Europe, from Gutenberg's workshop in Mainz to the first presses of Venice and Lisbon,"
    " and how the price of a book fell from a year's wages to a week's within a century."
)


def chat_requests() -> list[dict]:
    system = {"role": "system", "content": SYSTEM}
    bodies = [[system, {"role": "user", "content": question}] for question in QUESTIONS]
    bodies.insert(2, bodies[0])  # an exact repeat
    bodies.append([{"role": "user", "content": "hello there"}])  # shares the header only
    return [{"messages": messages} for messages in bodies]


def multi_turn_requests() -> list[dict]:
    messages = [{"role": "system", "content": SYSTEM}]
    bodies = []
    for turn, question in enumerate(QUESTIONS):
        messages = [*messages, {"role": "user", "content": question}]
        bodies.append({"messages": messages})
        if turn < len(ANSWERS):
            messages = [*messages, {"role": "assistant", "content": ANSWERS[turn]}]
    return bodies


def text_requests() -> list[dict]:
    prompts = [f"{PREFACE}\n\nQuestion: {question}\nAnswer:" for question in QUESTIONS]
    prompts.insert(2, prompts[0])
    prompts.append("hello there")
    return [{"prompt": prompt} for prompt in prompts]


def token_id_requests() -> list[dict]:
    shared = list(range(1000, 1070))  # two full blocks and 6 tokens
    two_blocks = list(range(5000, 5064))
    prompts = [
        shared + list(range(2000, 2011)),
        shared + list(range(3000, 3041)),
        two_blocks,
        two_blocks,
        [*shared[:40], 7],
    ]
    return [{"token_ids": ids} for ids in prompts]


EVICTION_BLOCKS = 48
"""The pool of the vLLM that the eviction traces run on (`--num-gpu-blocks-override`): vLLM
keeps one of them (its null block), so 47 hold prompts."""


def eviction_requests(groups: int = 6, requests: int = 40, seed: int = 7) -> list[dict]:
    """Token-id prompts of `groups` prefixes of 12 blocks (384 tokens), each with a suffix of
    its own (1 to 40 tokens), in a seeded order that returns to a group after others have
    evicted it: together they need more than `EVICTION_BLOCKS`."""
    import random

    chooser = random.Random(seed)
    prefixes = [list(range(10_000 + 1_000 * g, 10_384 + 1_000 * g)) for g in range(groups)]
    bodies = []
    group = 0
    for index in range(requests):
        if index and chooser.random() < 0.6:  # another group; else the same one again
            group = chooser.randrange(groups)
        suffix = list(range(60_000 + 64 * index, 60_000 + 64 * index + chooser.randint(1, 40)))
        bodies.append({"token_ids": prefixes[group] + suffix})
    return bodies


TRACES = {
    "chat": chat_requests,
    "multi-turn": multi_turn_requests,
    "text": text_requests,
    "token-ids": token_id_requests,
    "eviction": eviction_requests,
}


def write_trace(name: str, directory: Path) -> tuple[Path, list[dict]]:
    """The trace file (JSONL, one request body a line) and its bodies."""
    bodies = TRACES[name]()
    path = directory / f"{name}.jsonl"
    path.write_text("".join(json.dumps(body, ensure_ascii=False) + "\n" for body in bodies))
    return path, bodies
