"""A trace as the engine runs it: token ids in the model's vocabulary, output lengths, cuts.

- Token records (request traces rendered by the tokenizer, or `token_ids` lines): ids
  already below the vocabulary size stay as they are; otherwise every distinct id of the
  trace is mapped to its rank among them, so equal ids stay equal and different ids stay
  different (the engine sees exactly the trace's sharing). More distinct ids than the
  vocabulary holds is an error.
- Hash-id records (Mooncake, Bailian): hash id h is the block `block_tokens(seed, h)` of
  `block_size` tokens wherever it appears; a request's tokens are its blocks in order, the
  last cut to `input_length` (tokens past the listed blocks are the request's own).
- Output lengths come from the trace (at least 1: TTFT needs a first token), capped by
  `max_output_tokens`; `max_prompt_tokens` keeps each prompt's head, `limit` the first
  requests. `Cut` counts what was removed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pcache.errors import InputError
from pcache.replayer.report import Cut
from pcache.traces.record import Trace, TraceRecord


@dataclass(frozen=True, slots=True)
class Slicing:
    """What part of the trace to run."""

    limit: int | None = None
    max_prompt_tokens: int | None = None
    max_output_tokens: int | None = None


def block_tokens(seed: int, hash_id: int, block_size: int, vocab_size: int) -> list[int]:
    """The tokens hash id `hash_id` stands for: a seeded draw, the same wherever it appears."""
    generator = np.random.default_rng([seed, hash_id & 0xFFFFFFFFFFFFFFFF])
    return generator.integers(0, vocab_size, block_size).tolist()


def engine_trace(
    trace: Trace, vocab_size: int, max_model_len: int, slicing: Slicing, seed: int = 0
) -> tuple[Trace, Cut]:
    """`trace` as token records the engine can run (prompt and output within its positions)."""
    cut = Cut()
    records = trace.records
    if slicing.limit is not None and len(records) > slicing.limit:
        cut.requests_dropped = len(records) - slicing.limit
        records = records[: slicing.limit]
    if not records:
        raise InputError(trace.source, "no requests to replay")
    if trace.block_size is not None:
        prompts = [_hash_id_tokens(r, trace.block_size, vocab_size, seed) for r in records]
    else:
        prompts = _map_into_vocabulary(trace.source, records, vocab_size)
    converted = []
    for record, prompt in zip(records, prompts, strict=True):
        if slicing.max_prompt_tokens is not None and len(prompt) > slicing.max_prompt_tokens:
            cut.prompts_truncated += 1
            cut.prompt_tokens_dropped += len(prompt) - slicing.max_prompt_tokens
            prompt = prompt[: slicing.max_prompt_tokens]
        if not prompt:
            raise InputError(trace.source, "an empty prompt cannot be replayed", record.line)
        output_length = max(record.output_length, 1)
        if slicing.max_output_tokens is not None and output_length > slicing.max_output_tokens:
            cut.outputs_capped += 1
            cut.output_tokens_dropped += output_length - slicing.max_output_tokens
            output_length = slicing.max_output_tokens
        if len(prompt) + output_length > max_model_len:
            where = f"request {record.index}" if record.line is None else "request"
            raise InputError(
                trace.source,
                f"{where} of {len(prompt)} prompt + {output_length} output tokens exceeds the"
                f" model's {max_model_len} positions (--max-prompt-tokens,"
                " --max-output-tokens cut it)",
                record.line,
            )
        converted.append(
            replace(
                record,
                input_length=len(prompt),
                output_length=output_length,
                token_ids=prompt,
                hash_ids=None,
            )
        )
    result = Trace(
        source=trace.source,
        format=trace.format,
        block_size=None,
        records=converted,
        skipped=trace.skipped,
        reordered=trace.reordered,
        has_timestamps=trace.has_timestamps,
    )
    return result, cut


def _hash_id_tokens(record: TraceRecord, block_size: int, vocab_size: int, seed: int):
    assert record.hash_ids is not None
    tokens: list[int] = []
    for hash_id in record.hash_ids:
        if len(tokens) >= record.input_length:
            break
        tokens.extend(block_tokens(seed, hash_id, block_size, vocab_size))
    if len(tokens) < record.input_length:  # past the listed blocks: this request's own tokens
        own = np.random.default_rng([seed, 1 << 62, record.index])
        tokens.extend(own.integers(0, vocab_size, record.input_length - len(tokens)).tolist())
    return tokens[: record.input_length]


def _map_into_vocabulary(
    source: str, records: list[TraceRecord], vocab_size: int
) -> list[list[int]]:
    prompts = [list(record.token_ids or ()) for record in records]
    largest = max((max(prompt) for prompt in prompts if prompt), default=0)
    if largest < vocab_size:
        return prompts
    distinct = sorted({token for prompt in prompts for token in prompt})
    if len(distinct) > vocab_size:
        raise InputError(
            source,
            f"the trace uses {len(distinct):,} distinct token ids, more than the model's"
            f" vocabulary of {vocab_size:,}: they cannot stay distinct (use a model with a"
            " larger vocabulary, or its own tokenizer)",
        )
    rank = {token: position for position, token in enumerate(distinct)}
    return [[rank[token] for token in prompt] for prompt in prompts]
