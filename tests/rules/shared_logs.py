"""Logs shaped like a gateway's: sessions of one or two apps interleaved in time, with one cache
breaker planted in some sessions and none in the others.

`build(cause, shape, seed)` returns the request bodies in time order (no session ids: sessions
are inferred) and, for each, the session it belongs to; `PLANTED[cause]` is the lint code the
breaker must be reported as. Shapes: `alone` (the planted sessions only), `same_app` (interleaved
with clean sessions of the same app), `other_app` (interleaved with sessions of another app,
whose system prompt and tools are disjoint).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

PLANTED = {
    "clock": "PC101",
    "random_id": "PC103",
    "per_user": "PC104",
    "whitespace": "PC107",
    "key_order": "PC201",
    "tool_order": "PC301",
    "tool_set": "PC302",
    "tool_trace_id": "PC103",
    "window": "PC402",
    "compaction": "PC403",
    "reasoning": "PC404",
}
SHAPES = ("alone", "same_app", "other_app")

TRAVEL = (
    "You are the support agent of Example Travel. Answer in the customer's language, cite the"
    " booking number when you refer to a booking, never promise refunds the policy does not"
    " allow, and hand over to a human when the customer asks for one.\n\n"
    "# Style\n- Keep answers short: two or three sentences.\n- Ask one question when something"
    " is missing.\n- Use the tools to look up bookings, flights and the refund policy; never"
    " guess what they would return.\n\n# Policy\nRefunds follow the fare rules of the booking."
    " Changes are free up to 24 hours before departure on flexible fares."
)
REVIEW = (
    "You are a code reviewer for a Python monorepo. Read the diff, point at bugs first, then"
    " at missing tests, then at style. Quote the lines you mean and suggest a concrete change."
    "\n\n# Conventions\n- Type hints on public functions.\n- No bare except.\n- Tests live"
    " beside the code they test and use pytest fixtures, never global state."
)
TRAVEL_TOOLS = [
    ("find_booking", "Look up a booking by its number or the customer's email address."),
    ("search_flights", "Search the flights of the schedule by route and departure date."),
    ("refund_policy", "Return the refund policy that applies to a booking and its fare."),
    ("hand_over", "Hand the conversation over to a human agent with a short summary."),
]
REVIEW_TOOLS = [
    ("read_file", "Read a file of the repository at the reviewed commit."),
    ("run_tests", "Run the test suite of one package and return the failures."),
    ("post_comment", "Post a review comment on a line of the diff."),
]
NAMES = ["Alice Moreau", "Bob Okafor", "Chen Wei", "Dana Kowalski", "Emil Sorensen", "Farah Aziz"]
PLANS = ["gold", "silver", "basic"]
WORDS = [
    "booking",
    "flight",
    "seat",
    "refund",
    "change",
    "luggage",
    "pets",
    "hotel",
    "transfer",
    "invoice",
    "receipt",
    "upgrade",
    "window",
    "aisle",
    "meal",
    "visa",
    "passport",
    "delay",
    "gate",
    "cabin",
]


def _tool(name: str, description: str, reverse_keys: bool = False) -> dict:
    properties = {"query": {"type": "string"}, "limit": {"type": "integer"}}
    if reverse_keys:  # the same schema, its keys written in another order
        properties = {"limit": {"type": "integer"}, "query": {"type": "string"}}
    parameters = {"type": "object", "properties": properties, "required": ["query"]}
    function = {"name": name, "description": description, "parameters": parameters}
    return {"type": "function", "function": function}


@dataclass
class App:
    name: str
    system: str
    tools: list[tuple[str, str]]


APPS = {
    "travel": App("travel", TRAVEL, TRAVEL_TOOLS),
    "review": App("review", REVIEW, REVIEW_TOOLS),
}


@dataclass
class Session:
    label: str
    app: App
    cause: str | None
    turns: int
    rng: random.Random
    user: str = ""
    messages: list[dict] = field(default_factory=list)
    sent: int = 0

    def question(self) -> str:
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(6, 14)))
        return f"Case {self.rng.randint(1000, 9999)}: {words}?"

    def answer(self) -> str:
        words = " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(20, 40)))
        return f"Here is what I found: {words}."


def _system(session: Session, now: datetime) -> str:
    text = session.app.system
    cause, turn = session.cause, session.sent
    head, _, rest = text.partition("\n\n")
    if cause == "clock":
        return f"{head}\nCurrent time: {now.strftime('%Y-%m-%dT%H:%M:%SZ')}\n\n{rest}"
    if cause == "random_id":
        return f"{head}\nRequest ID: {uuid.UUID(int=session.rng.getrandbits(128))}\n\n{rest}"
    if cause == "per_user":
        return f"{text}\n\n# Customer\n{session.user}"
    if cause == "whitespace" and turn >= 1:
        return text.replace("\n", "\r\n")
    return text


def _tools(session: Session) -> list[dict]:
    cause, turn = session.cause, session.sent
    specs = list(session.app.tools)
    tools = []
    for index, (name, description) in enumerate(specs):
        if cause == "tool_trace_id" and index == 1:
            description = f"{description} (trace {session.rng.getrandbits(64):016x})"
        tools.append(_tool(name, description, cause == "key_order" and turn >= 1 and index == 0))
    if cause == "tool_order" and turn >= 1:
        tools = tools[1:] + tools[:1]
    if cause == "tool_set" and turn >= 1:
        tools = tools[:-1]
    return tools


def _history(session: Session) -> list[dict]:
    """The messages sent after the system prompt, with the planted history change."""
    messages = [dict(m) for m in session.messages]
    cause, turn = session.cause, session.sent
    if cause == "reasoning":
        for message in messages[:-2]:  # only the newest assistant turn keeps its reasoning
            message.pop("reasoning_content", None)
    if cause == "window" and turn >= 2:
        messages = messages[2 * (turn - 1) :]
    if cause == "compaction" and turn >= 2:
        summary = {
            "role": "user",
            "content": "Summary of the conversation so far: "
            + " ".join(str(m["content"])[:30] for m in messages[: 2 * (turn - 1)]),
        }
        messages = [summary, *messages[2 * (turn - 1) :]]
    return messages


def _customer(rng: random.Random, index: int) -> str:
    name = NAMES[index % len(NAMES)]
    email = name.lower().replace(" ", ".") + "@example.com"
    return f"Name: {name}\nPlan: {rng.choice(PLANS)}\nEmail: {email}"


def _sessions(cause: str, shape: str, rng: random.Random) -> list[Session]:
    travel, review = APPS["travel"], APPS["review"]
    planted = 2 if cause == "per_user" else 1
    sessions = []
    for index in range(planted):
        turns = rng.randint(3, 4)
        session = Session(f"p{index}", travel, cause, turns, random.Random(rng.random()))
        session.user = _customer(session.rng, index)
        sessions.append(session)
    clean = {"alone": 0, "same_app": rng.randint(2, 4), "other_app": rng.randint(2, 4)}[shape]
    for index in range(clean):
        app = travel if shape == "same_app" else review
        sessions.append(
            Session(f"c{index}", app, None, rng.randint(1, 3), random.Random(rng.random()))
        )
    return sessions


def build(cause: str, shape: str, seed: int) -> tuple[list[dict], list[str]]:
    """(bodies, session of each): the sessions interleaved at random in time order."""
    assert cause in PLANTED and shape in SHAPES, (cause, shape)
    rng = random.Random(seed)
    sessions = _sessions(cause, shape, rng)
    now = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)
    order = [session for session in sessions for _ in range(session.turns)]
    rng.shuffle(order)
    if sessions[0].cause == "per_user":  # the first request is a planted session's
        first = order.index(sessions[0])
        order[0], order[first] = order[first], order[0]
    bodies, labels = [], []
    for session in order:
        now += timedelta(seconds=rng.randint(5, 90))
        session.messages.append({"role": "user", "content": session.question()})
        messages = [{"role": "system", "content": _system(session, now)}, *_history(session)]
        bodies.append({"model": "gpt-4o", "messages": messages, "tools": _tools(session)})
        labels.append(session.label)
        reply = {"role": "assistant", "content": session.answer()}
        if session.cause == "reasoning":
            reply["reasoning_content"] = "I should look this up first. " + session.answer()
        session.messages.append(reply)
        session.sent += 1
    return bodies, labels


def interleave(first: list, second: list, rng: random.Random) -> tuple[list[dict], list[str]]:
    """Two logs of (body, session) merged at random, each keeping its own order."""
    merged, a, b = [], list(first), list(second)
    while a or b:
        source = a if b == [] or (a and rng.random() < len(a) / (len(a) + len(b))) else b
        merged.append(source.pop(0))
    return [body for body, _ in merged], [label for _, label in merged]
