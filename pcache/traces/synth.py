"""Synthetic workloads (`pcache trace synth`), seeded and deterministic.

Workloads:
- `shared-prefix`: SGLang's generated-shared-prefix shape: `groups` system prompts of
  `system_len` tokens, `prompts_per_group` questions of `question_len` tokens each, outputs of
  `output_len`; a group is picked round-robin, or by Zipf popularity with `zipf_alpha`.
- `chat`: multi-turn sessions, append-only (each turn resends the whole history); with
  `window` > 0 only the last `window` turns are kept, so the prefix after the system prompt
  changes every turn once the window is full.
- `agent`: sessions with tool definitions after the system prompt; every step appends an
  assistant tool call and its result.

Arrivals: `poisson` (exponential gaps at `rate` requests/s) or `bursty` (gamma gaps with a
coefficient of variation of 2, same mean); turns of one session follow each other after
an exponential think time.

A prompt is a list of segments (id, length); segments shared between requests are what a
cache can reuse. Outputs: `requests` (OpenAI chat bodies with words as text), `token-ids`
(`{"token_ids": [...]}` bodies) or `hash-ids` (Mooncake-style lines with `block_size`, one
id per block of the concatenated prompt; equal prefixes give equal ids).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from pcache.defaults import DEFAULT_BLOCK_SIZE
from pcache.errors import OptionError
from pcache.options.numbers import check_number

WORKLOADS = ("shared-prefix", "chat", "agent")
OUTPUTS = ("requests", "token-ids", "hash-ids")
ARRIVALS = ("poisson", "bursty")
VOCABULARY_SIZE = 50_000
_WORDS = (  # noqa: SIM905
    "the of and to in is that for it as was with be by on not he this are or his from at which"
    " but have an they you were her she there been one all we their has would when if so no"
    " what up out can about into them more some could time these two may then do first any my"
    " now such like our over man me even most made after also did many before must through"
    " back years where much your way well down should because each just those people how too"
    " little state good very make world still own see men work long get here between both life"
    " being under never day same another know while last might us great old year off come"
    " since against go came right used take three"
).split()


MAX_TOKENS = 1 << 24  # tokens in one synthetic segment: beyond any context window
_COUNT_BOUNDS = (
    ("num_requests", 1, 10**9),
    ("groups", 1, 10**9),
    ("prompts_per_group", 1, 10**9),
    ("turns", 1, 10**6),
    ("window", 0, 10**6),
    ("block_size", 1, MAX_TOKENS),
    ("system_len", 0, MAX_TOKENS),
    ("question_len", 0, MAX_TOKENS),
    ("output_len", 0, MAX_TOKENS),
    ("turn_len", 0, MAX_TOKENS),
    ("tools_len", 0, MAX_TOKENS),
)


@dataclass(frozen=True, slots=True)
class SynthOptions:
    """Knobs of a synthetic workload."""

    workload: str = "shared-prefix"
    num_requests: int = 1000
    seed: int = 0
    arrival: str = "poisson"
    rate: float = 10.0
    groups: int = 64
    prompts_per_group: int = 16
    system_len: int = 2048
    question_len: int = 128
    output_len: int = 256
    zipf_alpha: float | None = None
    turns: int = 8
    turn_len: int = 128
    window: int = 0
    tools_len: int = 1024
    think_time_s: float = 10.0
    output: str = "requests"
    block_size: int = DEFAULT_BLOCK_SIZE

    def __post_init__(self) -> None:
        if self.workload not in WORKLOADS:
            raise OptionError("workload", f"must be one of {', '.join(WORKLOADS)}")
        if self.output not in OUTPUTS:
            raise OptionError("output_format", f"must be one of {', '.join(OUTPUTS)}")
        if self.arrival not in ARRIVALS:
            raise OptionError("arrival", "must be poisson or bursty")
        for name, low, high in _COUNT_BOUNDS:
            option = "--" + name.replace("_", "-")
            check_number(option, getattr(self, name), minimum=low, maximum=high)
        check_number("--seed", self.seed, minimum=0, maximum=2**63 - 1)
        check_number("--rate", self.rate, above=0)
        check_number("think_time_s", self.think_time_s, minimum=0)
        if self.zipf_alpha is not None:
            check_number("--zipf-alpha", self.zipf_alpha, above=0)


@dataclass(slots=True)
class SynthRequest:
    """One synthetic request: arrival, session, prompt segments (role, id, length), output."""

    timestamp_ms: int
    session_id: str
    segments: list[tuple[str, int, int]]
    output_length: int
    shared: int | None = None
    """Leading segments other sessions send too; the rest are this session's own (None:
    every segment may be shared)."""
    last_of_session: bool = False

    @property
    def input_length(self) -> int:
        return sum(length for _, _, length in self.segments)


_CHUNK = 4096  # random draws taken at a time: a stream of a million requests stays small


def _gaps(rng: np.random.Generator, options: SynthOptions, count: int) -> np.ndarray:
    mean_ms = 1000.0 / options.rate
    if options.arrival == "poisson":
        return rng.exponential(mean_ms, count)
    shape = 0.25  # coefficient of variation 2
    return rng.gamma(shape, mean_ms / shape, count)


def _chunked(draw, count: int) -> Iterator[np.ndarray]:
    """`draw(n)` for `count` values in all, a chunk at a time: the same values as one call
    (numpy's generators draw each value from the same stream either way)."""
    while count > 0:
        size = min(_CHUNK, count)
        yield draw(size)
        count -= size


def _running_sum(chunks: Iterator[np.ndarray]) -> Iterator[float]:
    """The values of `np.cumsum` over the concatenated chunks, computed chunk by chunk."""
    carry = 0.0
    for chunk in chunks:
        chunk = chunk.copy()
        chunk[0] += carry  # the same additions, in the same order, as one cumsum
        sums = np.cumsum(chunk)
        carry = sums[-1]
        yield from sums.tolist()


def _after(rng: np.random.Generator, draw, count: int) -> np.random.Generator:
    """A copy of `rng` that has drawn `draw(rng, n)` for `count` values (and `rng` has not)."""
    copy = np.random.Generator(type(rng.bit_generator)())
    copy.bit_generator.state = rng.bit_generator.state
    for _ in _chunked(lambda size: draw(copy, size), count):
        pass
    return copy


def _shared_prefix(rng: np.random.Generator, options: SynthOptions) -> Iterator[SynthRequest]:
    count = options.num_requests
    # one generator, three streams drawn one after the other: arrivals, groups, questions
    arrivals = _running_sum(_chunked(lambda size: _gaps(rng, options, size), count))
    after_gaps = _after(rng, lambda g, size: _gaps(g, options, size), count)
    if options.zipf_alpha is not None:
        weights = 1.0 / np.arange(1, options.groups + 1) ** options.zipf_alpha
        chances = weights / weights.sum()
        group_chunks = _chunked(
            lambda size: after_gaps.choice(options.groups, size, p=chances), count
        )
        questions_rng = _after(
            after_gaps, lambda g, size: g.choice(options.groups, size, p=chances), count
        )
    else:
        group_chunks = (
            np.arange(start, min(start + _CHUNK, count)) % options.groups
            for start in range(0, count, _CHUNK)
        )
        questions_rng = after_gaps
    question_chunks = _chunked(
        lambda size: questions_rng.integers(0, options.prompts_per_group, size), count
    )
    groups = (int(group) for chunk in group_chunks for group in chunk.tolist())
    questions = (int(question) for chunk in question_chunks for question in chunk.tolist())
    for arrival, group, question in zip(arrivals, groups, questions, strict=True):
        question_id = group * options.prompts_per_group + question
        segments = [
            ("system", 1 + group, options.system_len),
            ("user", 1_000_000 + question_id, options.question_len),
        ]
        yield SynthRequest(int(arrival), f"group-{group}", segments, options.output_len)


def _session(
    options: SynthOptions, session: int, start: float, first: int, think: np.random.Generator
) -> list[SynthRequest]:
    """The requests of one session (`first`: requests generated before it), in turn order."""
    agent = options.workload == "agent"
    head = [("system", 1, options.system_len)]
    if agent:
        head.append(("tools", 2, options.tools_len))
    history: list[tuple[str, int, int]] = []
    clock = start
    next_segment = 10_000_000 + 2 * first
    requests = []
    for _turn in range(options.turns):
        if first + len(requests) >= options.num_requests:
            break
        next_segment += 1
        role = "tool" if agent and history else "user"
        turn = [(role, next_segment, options.turn_len)]
        kept = history[-2 * options.window :] if options.window > 0 else history
        requests.append(
            SynthRequest(
                int(clock),
                f"session-{session}",
                head + kept + turn,
                options.output_len,
                shared=len(head),
            )
        )
        next_segment += 1
        history = history + turn + [("assistant", next_segment, options.output_len)]
        clock += options.output_len * 20.0 + think.exponential(options.think_time_s * 1000)
    if requests:
        requests[-1].last_of_session = True
    return requests


def _sessions(rng: np.random.Generator, options: SynthOptions) -> Iterator[SynthRequest]:
    """Sessions' requests in timestamp order (a stable sort of the session-major order),
    merged as the sessions start: only the sessions still running are held."""
    num_sessions = max(1, -(-options.num_requests // options.turns))
    starts = _running_sum(_chunked(lambda size: _gaps(rng, options, size), num_sessions))
    think = _after(rng, lambda g, size: _gaps(g, options, size), num_sessions)
    pending: list[tuple[int, int, int, SynthRequest]] = []
    for session, start in enumerate(starts):
        start *= options.turns
        first = session * options.turns
        if first >= options.num_requests:
            break
        bound = (int(start), session)  # no later session has a request before this
        while pending and pending[0][:2] < bound:
            yield heapq.heappop(pending)[3]
        for turn, request in enumerate(_session(options, session, start, first, think)):
            heapq.heappush(pending, (request.timestamp_ms, session, turn, request))
    while pending:
        yield heapq.heappop(pending)[3]


def iter_requests(options: SynthOptions) -> Iterator[SynthRequest]:
    """The workload's requests in arrival order, generated as they are consumed."""
    rng = np.random.default_rng(options.seed)
    if options.workload == "shared-prefix":
        return _shared_prefix(rng, options)
    return _sessions(rng, options)


# -- rendering one request ------------------------------------------------------------------


def segment_tokens(seed: int, segment_id: int, length: int) -> list[int]:
    """The token ids of one segment: a function of (seed, segment id) only."""
    rng = np.random.default_rng((seed, segment_id))
    return rng.integers(1, VOCABULARY_SIZE, length).tolist()


def segment_text(seed: int, segment_id: int, length: int) -> str:
    rng = np.random.default_rng((seed, segment_id))
    picks = rng.integers(0, len(_WORDS), length)
    return " ".join(_WORDS[i] for i in picks)


_State = tuple[int, int, tuple, int]
"""Where a walk over segments stands: (ids so far, parent id, pieces of the open block,
tokens in it)."""


class BlockInterner:
    """Ids for blocks of concatenated segments: equal prefixes give equal ids, chained.

    Blocks that hold a session's own segment can only recur in that session: they are kept
    per session and forgotten when it ends, so memory follows the sessions running, not the
    requests written. Ids are numbered in order of first appearance either way. A session's
    request repeats the segments of its previous one: the walk resumes where they end."""

    def __init__(self, block_size: int):
        self.block_size = block_size
        self.ids: dict = {}
        self.scoped: dict[str, dict] = {}
        self.last: dict[str, tuple[list, list[int], list[_State]]] = {}
        """Per session: its last request's segments, ids, and the walk's state before each
        of those segments."""
        self.next_id = 0

    def hash_ids(
        self,
        segments: list[tuple[str, int, int]],
        scope: str | None = None,
        shared: int | None = None,
    ) -> list[int]:
        """The ids of the blocks of `segments`; those after the first `shared` segments are
        `scope`'s own (None: every block may be shared)."""
        first, ids, state = 0, [], (0, -1, (), 0)
        previous = self.last.get(scope) if scope is not None else None
        if previous is not None:
            old_segments, old_ids, old_states = previous
            limit = min(len(segments), len(old_segments))
            while first < limit and segments[first] == old_segments[first]:
                first += 1
            state = old_states[first]  # the state before segment `first`, or at the end
            ids = old_ids[: state[0]]
        states: list[_State] = list(previous[2][:first]) if previous is not None and first else []
        _, parent, open_pieces, filled = state
        pieces = list(open_pieces)
        table = self.ids
        own = scope is not None and shared is not None
        if own and any(length for _, _, length in segments[shared:first]):
            table = self.scoped.setdefault(scope, {})  # a block holds the session's own
        for index in range(first, len(segments)):
            states.append((len(ids), parent, tuple(pieces), filled))
            _, segment_id, length = segments[index]
            if own and index >= shared and length:
                table = self.scoped.setdefault(scope, {})
            offset = 0
            while offset < length:
                take = min(self.block_size - filled, length - offset)
                pieces.append((segment_id, offset, take))
                filled += take
                offset += take
                if filled == self.block_size:
                    parent = self._intern(table, parent, pieces)
                    ids.append(parent)
                    pieces, filled = [], 0
        end = (len(ids), parent, tuple(pieces), filled)
        if pieces:
            ids.append(self._intern(table, parent, pieces))
        if scope is not None:
            self.last[scope] = (segments, ids, [*states, end])
        return ids

    def forget(self, scope: str) -> None:
        self.scoped.pop(scope, None)
        self.last.pop(scope, None)

    def _intern(self, table: dict, parent: int, pieces: list) -> int:
        key = (parent, tuple(pieces))
        found = table.get(key)
        if found is None:
            found = table[key] = self.next_id
            self.next_id += 1
        return found


def iter_lines(
    options: SynthOptions, requests: Iterable[SynthRequest] | None = None
) -> Iterator[dict]:
    """The JSON objects of the output, one per request (`requests`: `iter_requests`')."""
    interner = BlockInterner(options.block_size)
    for request in iter_requests(options) if requests is None else requests:
        common = {
            "timestamp": request.timestamp_ms,
            "session_id": request.session_id,
            "output_length": request.output_length,
        }
        if options.output == "hash-ids":
            hash_ids = interner.hash_ids(request.segments, request.session_id, request.shared)
            if request.last_of_session:
                interner.forget(request.session_id)
            yield {
                **common,
                "input_length": request.input_length,
                "hash_ids": hash_ids,
                "block_size": options.block_size,
            }
        elif options.output == "token-ids":
            tokens: list[int] = []
            for _, segment_id, length in request.segments:
                tokens.extend(segment_tokens(options.seed, segment_id, length))
            yield {**common, "token_ids": tokens}
        else:
            messages = []
            for role, segment_id, length in request.segments:
                text = segment_text(options.seed, segment_id, length)
                chat_role = "system" if role in ("system", "tools") else role
                if role == "tool":
                    chat_role = "user"
                if messages and messages[-1]["role"] == chat_role:
                    messages[-1]["content"] += "\n" + text
                else:
                    messages.append({"role": chat_role, "content": text})
            yield {**common, "model": "synthetic", "messages": messages}
