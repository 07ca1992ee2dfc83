"""Engine: the Python API (`add_request`, `step`, `generate`) over scheduler, pool and runner.

When a block's hash becomes visible. The shared KV cache manager (vLLM semantics) publishes
a block's hash at scheduling time, in `allocate_slots`, before the forward pass that writes
its KV. A later request can therefore be admitted in the same step with a hit on that block.
This is safe because every reader of the block is in the same forward pass or a later one,
and within a pass each attention layer first stores the K/V of every token of the batch,
then attends (`pcache.engine.attention.Attention.forward`): at layer L the block holds layer
L's K/V before any query reads it. A published block is never evicted while referenced, and
a block is only published when the scheduled tokens of its owner cover it entirely.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass

from pcache.cache.hashing import HashSettings
from pcache.cache.kv_cache_manager import KVCacheManager
from pcache.cache.request import CacheRequest
from pcache.engine.config import EngineConfig
from pcache.engine.limits import RequestLimits
from pcache.engine.runner import ModelRunner, ScheduledSequence
from pcache.engine.scheduler import Scheduler
from pcache.engine.sequence import Sequence, SequenceStatus
from pcache.errors import EngineError


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What one step produced for one sequence."""

    request_id: str
    new_token_id: int | None
    finished: bool
    error: str | None = None
    """Set when the request failed (it is finished, with no new token)."""


class Engine:
    """A paged-attention inference engine with automatic prefix caching."""

    def __init__(self, config: EngineConfig, runner: ModelRunner | None = None) -> None:
        """`runner`: another engine's, to share its weights; this engine gets its own KV cache
        (as many blocks as that runner's), so two engines can replay the same requests with
        different settings over one set of weights."""
        self.config = config
        if runner is None:
            self.runner = ModelRunner(config)
            self.kv_cache = self.runner.kv_cache
        else:
            assert (runner.config.model, runner.config.device, runner.config.dtype) == (
                config.model,
                config.device,
                config.dtype,
            ), "a shared runner must hold the same model on the same device"
            assert runner.block_size == config.block_size
            self.runner = runner
            self.kv_cache = runner.allocate_kv_cache()
        self.model_config = self.runner.model_config
        self.limits = RequestLimits(
            self.model_config.vocab_size,
            self.runner.max_model_len,
            self.runner.num_blocks,
            config.block_size,
        )
        self.hash_settings = HashSettings(config.hash_algo, config.block_size)
        self._ids = itertools.count()
        self._fresh_state()

    def reset(self) -> None:
        """A fresh cache state: an empty pool and scheduler, no sequences (none may be running)."""
        assert not self.has_unfinished_requests(), "reset while requests are running"
        self._fresh_state()

    def _fresh_state(self) -> None:
        self.kv_manager = KVCacheManager(
            self.runner.num_blocks,
            self.config.block_size,
            enable_caching=self.config.enable_prefix_caching,
            max_model_len=self.runner.max_model_len,
        )
        self.scheduler = Scheduler(self.config, self.kv_manager)
        self.sequences: dict[str, Sequence] = {}

    def add_request(
        self,
        token_ids: list[int],
        max_new_tokens: int,
        cache_salt: str | None = None,
        *,
        temperature: float = 0.0,
        top_k: int = 0,
        ignore_eos: bool = False,
        request_id: str | None = None,
        arrival_time: float | None = None,
    ) -> str:
        """Queue a prompt; returns its request id. `arrival_time` (a `time.perf_counter()`
        reading, default now) is when the request arrived: TTFT counts from it."""
        token_ids = [int(token) for token in token_ids]
        self.check_request(token_ids, max_new_tokens)
        request_id = request_id or f"request-{next(self._ids)}"
        if request_id in self.sequences:
            raise EngineError(f"duplicate request id {request_id!r}")
        cache_request = CacheRequest.from_tokens(
            request_id, token_ids, self.hash_settings, cache_salt=cache_salt
        )
        sequence = Sequence(
            cache_request,
            max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            ignore_eos=ignore_eos,
            eos_token_ids=self.model_config.eos_token_ids,
            arrival_time=time.perf_counter() if arrival_time is None else arrival_time,
        )
        self.sequences[request_id] = sequence
        self.scheduler.add(sequence)
        return request_id

    def check_request(self, token_ids: list[int], max_new_tokens: int) -> None:
        """Raise EngineError unless the engine can run this prompt (reads only the config, so
        any thread may call it before handing the request over)."""
        self.limits.check(token_ids, max_new_tokens)

    def abort_request(self, request_id: str) -> None:
        """Stop a request between steps, waiting or running; its blocks go back to the pool
        (full blocks stay cached for later hits, as any finished request's do)."""
        sequence = self.sequences[request_id]
        if not sequence.is_finished:
            self.scheduler.abort(sequence)
            sequence.aborted = True
            sequence.finish_time = time.perf_counter()

    def release(self, request_id: str) -> Sequence:
        """Forget a finished request; a long-running caller does this once it read the result."""
        sequence = self.sequences.pop(request_id)
        assert sequence.is_finished, f"{request_id} is still running"
        return sequence

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished()

    def step(self) -> list[StepOutput]:
        """Schedule, run one forward pass, sample, and update every scheduled sequence."""
        batch = self.scheduler.schedule()
        if not batch:
            assert not self.scheduler.has_unfinished(), "the scheduler is stuck"
            return []
        self.runner.use_kv_cache(self.kv_cache)
        now = time.perf_counter()
        for item in batch:
            if item.sequence.first_scheduled_time is None:
                item.sequence.first_scheduled_time = now
        try:
            sampled = self.runner.run(batch)
        except Exception as error:  # one request failing must not end the rest
            batch, sampled, failed = self._isolate(batch, error)
        else:
            failed = []
        now = time.perf_counter()
        self.scheduler.postprocess(batch, sampled)
        outputs = [self._fail(sequence, reason, now) for sequence, reason in failed]
        for item in batch:
            sequence = item.sequence
            token = sequence.output_token_ids[-1] if item.samples else None
            if token is not None and sequence.first_token_time is None:
                sequence.first_token_time = now
            if sequence.status == SequenceStatus.FINISHED:
                sequence.finish_time = now
            outputs.append(StepOutput(sequence.request_id, token, sequence.is_finished))
        return outputs

    def _isolate(self, batch: list[ScheduledSequence], error: Exception):
        """A failed forward pass, run again one sequence at a time, in batch order (so a block
        written by one and read by a later one is written first). A sequence that fails alone
        is failed; the hashes of the blocks it was writing are dropped (their KV is not
        trustworthy), and a later sequence of the step holding one of those blocks is
        preempted (recomputed later). Returns (the batch that ran, its samples, failures)."""
        if len(batch) == 1:
            attempts = [(batch[0], error)]
        else:
            attempts = []
            for item in batch:
                try:
                    attempts.append((item, self.runner.run([item])))
                except Exception as alone:
                    attempts.append((item, alone))
        survivors, sampled, failed = [], [], []
        untrusted: set[int] = set()
        pool = self.kv_manager.block_pool
        for item, result in attempts:
            blocks = self.kv_manager.req_to_blocks[item.sequence.request_id]
            if any(block.block_id in untrusted for block in blocks):
                self.scheduler.running.remove(item.sequence)
                self.scheduler.preempt(item.sequence)
                continue
            if not isinstance(result, Exception):
                survivors.append(item)
                sampled.extend(result)
                continue
            size = self.config.block_size
            start = item.sequence.num_computed_tokens // size
            end = -(-(item.sequence.num_computed_tokens + item.num_new_tokens) // size)
            written = blocks[start:end]
            pool.evict(written)
            untrusted.update(block.block_id for block in written)
            failed.append((item.sequence, f"{type(result).__name__}: {result}"))
        return survivors, sampled, failed

    def _fail(self, sequence: Sequence, reason: str, now: float) -> StepOutput:
        """Finish a request whose step failed; its blocks go back to the pool."""
        self.scheduler.abort(sequence)
        sequence.error = reason
        sequence.finish_time = now
        return StepOutput(sequence.request_id, None, True, error=reason)

    def run_until_done(self) -> None:
        while self.has_unfinished_requests():
            self.step()

    def generate(
        self,
        prompts: list[list[int]],
        max_new_tokens: int,
        cache_salts: list[str | None] | None = None,
        ignore_eos: bool = False,
    ) -> list[Sequence]:
        """Run a batch of prompts to completion; sequences come back in prompt order."""
        salts = cache_salts or [None] * len(prompts)
        ids = [
            self.add_request(prompt, max_new_tokens, salt, ignore_eos=ignore_eos)
            for prompt, salt in zip(prompts, salts, strict=True)
        ]
        self.run_until_done()
        return [self.sequences[request_id] for request_id in ids]

    def check_integrity(self) -> None:
        self.scheduler.check_integrity()
