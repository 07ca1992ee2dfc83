"""ModelRunner: builds one step's batch metadata, runs the model, samples the next tokens."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from pcache.engine.allocator import keep_freed_memory
from pcache.engine.attention import get_backend
from pcache.engine.config import EngineConfig
from pcache.engine.context import AttentionMetadata, reset_context, set_context
from pcache.engine.kv_cache import KVCache, allocate_kv_cache, plan_num_blocks
from pcache.engine.loader import build_model, load_checkpoint, random_init
from pcache.engine.model_config import resolve_model_config
from pcache.engine.sampling import Sampler
from pcache.engine.sequence import Sequence
from pcache.errors import EngineError


@dataclass(slots=True)
class ScheduledSequence:
    """One sequence's share of a step: its next `num_new_tokens` tokens and its block ids."""

    sequence: Sequence
    num_new_tokens: int
    block_ids: list[int]
    samples: bool = field(init=False)
    """True when this step computes the sequence's last known token (so it gets logits);
    fixed when the step is scheduled, before the step advances the sequence."""

    def __post_init__(self) -> None:
        sequence = self.sequence
        self.samples = sequence.num_computed_tokens + self.num_new_tokens == sequence.num_tokens


class ModelRunner:
    """Owns the model weights, the KV cache tensors and the sampler."""

    def __init__(self, config: EngineConfig) -> None:
        self.config = config
        self.device = torch.device(config.device)
        if config.is_cuda and not torch.cuda.is_available():
            raise EngineError("--engine gpu needs a CUDA device; none is available")
        if not config.is_cuda:
            keep_freed_memory()  # a CPU step's tensors reuse the last step's pages
        self.dtype = getattr(torch, config.torch_dtype_name)
        self.model_config, directory = resolve_model_config(config.model)
        self.max_model_len = min(
            config.max_model_len or self.model_config.max_position_embeddings,
            self.model_config.max_position_embeddings,
        )
        self.block_size = config.block_size
        # memory first: refuse before allocating anything big
        self.num_blocks = plan_num_blocks(config, self.model_config, self.dtype, self.max_model_len)
        torch.manual_seed(config.seed)
        self.model = build_model(self.model_config, self.dtype, self.device, self.max_model_len)
        if directory is None:
            random_init(self.model, config.seed)
        else:
            load_checkpoint(self.model, directory)
        self.model.prepare_weights()
        self.kv_cache = self.allocate_kv_cache()
        self._bound_kv_cache: KVCache | None = None
        self.use_kv_cache(self.kv_cache)
        self.backend = get_backend(config.backend_name)
        self.sampler = Sampler(config.seed, self.device)

    def allocate_kv_cache(self, num_blocks: int | None = None) -> KVCache:
        """A KV cache for these weights (another engine can share the weights with its own)."""
        return allocate_kv_cache(
            self.model_config,
            num_blocks or self.num_blocks,
            self.block_size,
            self.dtype,
            self.device,
        )

    def use_kv_cache(self, kv_cache: KVCache) -> None:
        """Point every attention layer at `kv_cache` (the next forward passes read and write it)."""
        if self._bound_kv_cache is kv_cache:
            return
        for layer, (k_cache, v_cache) in zip(self.model.attention_layers(), kv_cache, strict=True):
            layer.k_cache, layer.v_cache = k_cache, v_cache
        self._bound_kv_cache = kv_cache

    def prepare(self, batch: list[ScheduledSequence]):
        input_ids: list[int] = []
        positions: list[int] = []
        slot_mapping: list[int] = []
        cu_seqlens_q = [0]
        seq_lens: list[int] = []
        block_size = self.block_size
        for item in batch:
            start = item.sequence.num_computed_tokens
            end = start + item.num_new_tokens
            assert item.num_new_tokens > 0 and end <= item.sequence.num_tokens
            assert len(item.block_ids) * block_size >= end, "KV blocks missing for new tokens"
            input_ids.extend(item.sequence.token_ids[start:end])
            positions.extend(range(start, end))
            slot_mapping.extend(
                item.block_ids[p // block_size] * block_size + p % block_size
                for p in range(start, end)
            )
            cu_seqlens_q.append(cu_seqlens_q[-1] + item.num_new_tokens)
            seq_lens.append(end)
        max_blocks = max(len(item.block_ids) for item in batch)
        table = [item.block_ids + [0] * (max_blocks - len(item.block_ids)) for item in batch]
        device = self.device

        def tensor(values, dtype):
            return torch.tensor(values, dtype=dtype, device=device)

        query_lens = [item.num_new_tokens for item in batch]
        metadata = AttentionMetadata(
            cu_seqlens_q=tensor(cu_seqlens_q, torch.int32),
            seq_lens=tensor(seq_lens, torch.int32),
            block_table=tensor(table, torch.int32),
            slot_mapping=tensor(slot_mapping, torch.int64),
            max_seqlen_q=max(query_lens),
            max_seqlen_k=max(seq_lens),
            query_lens_list=query_lens,
            seq_lens_list=seq_lens,
            backend=self.backend,
        )
        # the output rows: the last row of each sequence that samples (a decode step: all)
        sampling = [index for index, item in enumerate(batch) if item.samples]
        output_rows = None
        if len(sampling) < len(input_ids):
            output_rows = tensor([cu_seqlens_q[index + 1] - 1 for index in sampling], torch.int64)
            if sampling:
                metadata.outputs = output_metadata(metadata, sampling, output_rows)
        inputs = tensor(input_ids, torch.int64), tensor(positions, torch.int64)
        return inputs, metadata, output_rows

    @torch.inference_mode()
    def run(self, batch: list[ScheduledSequence]) -> list[int]:
        """One forward pass; returns the sampled token of every sequence that samples."""
        (input_ids, positions), metadata, output_rows = self.prepare(batch)
        set_context(metadata)
        try:
            hidden = self.model(input_ids, positions, output_rows)
        finally:
            reset_context()
        if hidden.shape[0] == 0:
            return []
        logits = self.model.compute_logits(hidden)
        sampling = [item.sequence for item in batch if item.samples]
        if self.config.record_logits:
            for sequence, row in zip(sampling, logits.float().cpu(), strict=True):
                sequence.logits.append(row)
        temperatures = [sequence.temperature for sequence in sampling]
        top_ks = [sequence.top_k for sequence in sampling]
        return self.sampler(logits, temperatures, top_ks if any(top_ks) else None)


def output_metadata(
    metadata: AttentionMetadata, sampling: list[int], output_rows: torch.Tensor
) -> AttentionMetadata:
    """The step's output rows as a decode step: one query for each sequence in `sampling`
    (its last row, `output_rows`), over all of that sequence's keys."""
    seq_lens = [metadata.seq_lens_list[index] for index in sampling]
    device = metadata.seq_lens.device
    return AttentionMetadata(
        cu_seqlens_q=torch.arange(len(sampling) + 1, dtype=torch.int32, device=device),
        seq_lens=metadata.seq_lens[sampling],
        block_table=metadata.block_table[sampling],
        slot_mapping=metadata.slot_mapping[output_rows],
        max_seqlen_q=1,
        max_seqlen_k=max(seq_lens),
        query_lens_list=[1] * len(sampling),
        seq_lens_list=seq_lens,
        backend=metadata.backend,
    )
