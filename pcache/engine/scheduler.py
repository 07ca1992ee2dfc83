"""Scheduler: continuous batching with chunked prefill over the shared KV cache manager.

Policy (vLLM v1's, simplified): running sequences first, in admission order, each taking the
tokens it still needs (one for decode) within the step's token budget; when the pool cannot
hold them, the most recently admitted running sequence is preempted (freed and recomputed
later). Then waiting sequences, first come first served, each after a prefix-cache lookup.
"""

from __future__ import annotations

from collections import deque

from pcache.cache.kv_cache_manager import KVCacheManager
from pcache.engine.config import EngineConfig
from pcache.engine.runner import ScheduledSequence
from pcache.engine.sequence import Sequence, SequenceStatus


class Scheduler:
    """Decides which tokens of which sequences the next forward pass computes."""

    def __init__(self, config: EngineConfig, kv_manager: KVCacheManager) -> None:
        self.max_num_batched_tokens = config.max_num_batched_tokens
        self.max_num_seqs = config.max_num_seqs
        self.kv_manager = kv_manager
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []

    def add(self, sequence: Sequence) -> None:
        self.waiting.append(sequence)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def schedule(self) -> list[ScheduledSequence]:
        budget = self.max_num_batched_tokens
        scheduled: list[Sequence] = []
        num_new: dict[Sequence, int] = {}
        preempted = False
        # running
        index = 0
        while index < len(self.running) and budget > 0:
            sequence = self.running[index]
            count = min(sequence.num_tokens - sequence.num_computed_tokens, budget)
            assert count > 0
            while self.kv_manager.allocate_slots(sequence.cache_request, count) is None:
                victim = self.running.pop()
                self.preempt(victim)
                preempted = True
                if victim is sequence:
                    break
            if sequence.status != SequenceStatus.RUNNING:
                break
            scheduled.append(sequence)
            num_new[sequence] = count
            budget -= count
            index += 1
        # waiting
        while self.waiting and budget > 0 and not preempted:
            if len(self.running) >= self.max_num_seqs:
                break
            sequence = self.waiting[0]
            request = sequence.cache_request
            assert request.num_computed_tokens == 0
            hits, num_hit_tokens = self.kv_manager.get_computed_blocks(request)
            count = min(sequence.num_tokens - num_hit_tokens, budget)
            if self.kv_manager.allocate_slots(request, count, num_hit_tokens, hits) is None:
                break
            self.waiting.popleft()
            self.kv_manager.record_prefix_cache_stats(
                request, num_hit_tokens, preempted=sequence.num_preemptions > 0
            )
            sequence.num_computed_tokens = num_hit_tokens
            if sequence.num_cached_tokens is None:
                sequence.num_cached_tokens = num_hit_tokens
            sequence.status = SequenceStatus.RUNNING
            self.running.append(sequence)
            scheduled.append(sequence)
            num_new[sequence] = count
            budget -= count
        return [
            ScheduledSequence(s, num_new[s], self.kv_manager.get_block_ids(s.request_id)[0])
            for s in scheduled
        ]

    def preempt(self, sequence: Sequence) -> None:
        self.kv_manager.free(sequence.cache_request)
        sequence.num_computed_tokens = 0
        sequence.num_preemptions += 1
        sequence.status = SequenceStatus.WAITING
        self.waiting.appendleft(sequence)

    def abort(self, sequence: Sequence) -> None:
        """Drop an unfinished sequence from its queue and give its blocks back."""
        if sequence.status == SequenceStatus.WAITING:
            self.waiting.remove(sequence)
        else:
            self.running.remove(sequence)
        self.kv_manager.free(sequence.cache_request)
        sequence.status = SequenceStatus.FINISHED

    def postprocess(self, batch: list[ScheduledSequence], sampled: list[int]) -> None:
        """Advance progress, append sampled tokens, free finished sequences."""
        tokens = iter(sampled)
        for item in batch:
            sequence = item.sequence
            samples = item.samples
            sequence.num_computed_tokens += item.num_new_tokens
            if samples:
                sequence.append_token(next(tokens))
            if sequence.is_finished:
                self.kv_manager.free(sequence.cache_request)
                self.running.remove(sequence)
        assert next(tokens, None) is None

    def check_integrity(self) -> None:
        self.kv_manager.check_integrity()
        for sequence in self.running:
            assert sequence.status == SequenceStatus.RUNNING
            blocks = self.kv_manager.get_block_ids(sequence.request_id)[0]
            assert len(blocks) * self.kv_manager.block_size >= sequence.num_computed_tokens
        for sequence in self.waiting:
            assert sequence.status == SequenceStatus.WAITING
            assert sequence.num_computed_tokens == 0
