"""One decoder for the Llama, Qwen2 and Qwen3 families (switches: qkv bias, q/k norm, ties)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from pcache.engine.attention import Attention
from pcache.engine.model_config import ModelConfig
from pcache.engine.models import onednn_linear
from pcache.engine.models.layers import (
    GatedMLP,
    RMSNorm,
    RotaryEmbedding,
    apply_rotary,
    head_rms_norm,
)

SMALL_BATCH = (2, 8)
"""Rows for which `compute_logits` multiplies weight @ hidden^T where the weight is not
reordered (measured on the CPU)."""
# checkpoint name -> (engine parameter name, shard index) for the packed projections
PACKED_MODULES = {
    "q_proj": ("qkv_proj", 0),
    "k_proj": ("qkv_proj", 1),
    "v_proj": ("qkv_proj", 2),
    "gate_proj": ("gate_up_proj", 0),
    "up_proj": ("gate_up_proj", 1),
}


class DecoderAttention(nn.Module):
    """Packed qkv projection, optional per-head q/k norms, rotary, paged attention."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.num_heads, self.num_kv_heads = config.num_heads, config.num_kv_heads
        self.head_dim = config.head_dim
        self.q_size, self.kv_size = config.q_size, config.kv_size
        self.qkv_proj = onednn_linear.Linear(
            config.hidden_size, self.q_size + 2 * self.kv_size, bias=config.attention_bias
        )
        self.o_proj = onednn_linear.Linear(self.q_size, config.hidden_size, bias=config.output_bias)
        self.q_norm = RMSNorm(self.head_dim, config.rms_norm_eps) if config.has_qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.rms_norm_eps) if config.has_qk_norm else None
        self.attn = Attention(self.num_heads, self.num_kv_heads, self.head_dim)

    def forward(
        self, hidden: Tensor, cos: Tensor, sin: Tensor, output_rows: Tensor | None = None
    ) -> Tensor:
        """Attention output of every row, or of `output_rows` alone (every row's K/V is
        stored either way)."""
        num_tokens = hidden.shape[0]
        qkv = self.qkv_proj(hidden)
        # q and k side by side as one [tokens, heads + kv_heads, head_dim] view: one norm pass
        # and one rotary pass serve both
        num_qk_heads = self.num_heads + self.num_kv_heads
        qk = qkv[:, : self.q_size + self.kv_size].view(num_tokens, num_qk_heads, self.head_dim)
        v = qkv[:, self.q_size + self.kv_size :].view(num_tokens, self.num_kv_heads, self.head_dim)
        if self.q_norm is not None:
            qk = head_rms_norm(qk, self.num_heads, self.q_norm, self.k_norm)
        q, k = apply_rotary(qk, cos, sin).split([self.num_heads, self.num_kv_heads], dim=1)
        if output_rows is None:
            out = self.attn(q, k, v)
        else:
            out = self.attn.forward_outputs(torch.index_select(q, 0, output_rows), k, v)
        return self.o_proj(out.reshape(out.shape[0], self.q_size))


class DecoderLayer(nn.Module):
    """Pre-norm attention block then pre-norm MLP block, each with a residual."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = DecoderAttention(config)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = GatedMLP(config.hidden_size, config.intermediate_size, config.mlp_bias)

    def forward(
        self, hidden: Tensor, cos: Tensor, sin: Tensor, output_rows: Tensor | None = None
    ) -> Tensor:
        """The next hidden states of every row, or of `output_rows` alone: the rest of this
        layer's work for the other rows (all but their K/V) is skipped."""
        attended = self.self_attn(self.input_layernorm(hidden), cos, sin, output_rows)
        if output_rows is not None:
            hidden = torch.index_select(hidden, 0, output_rows)
        # the residual stream is this forward pass's own tensor: add to it in place
        hidden.add_(attended)
        return hidden.add_(self.mlp(self.post_attention_layernorm(hidden)))


class DecoderModel(nn.Module):
    """Embedding, decoder layers and the final norm."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class CausalLM(nn.Module):
    """A decoder-only language model over a flat batch of tokens (no padding)."""

    def __init__(self, config: ModelConfig, max_positions: int) -> None:
        super().__init__()
        self.config = config
        self.model = DecoderModel(config)
        self.lm_head = onednn_linear.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.rotary = RotaryEmbedding(
            config.head_dim, max_positions, config.rope_theta, config.rope_scaling
        )
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(
        self, input_ids: Tensor, positions: Tensor, output_rows: Tensor | None = None
    ) -> Tensor:
        """Final hidden states of every row, or of `output_rows` alone (the rows whose logits
        are wanted, `AttentionMetadata.outputs` their attention metadata).

        The other rows' hidden states matter only through the K/V they give later layers,
        and the last layer has none after it: it stores every row's K/V, then one query per
        sampling sequence attends, and the output projection and MLP run on those rows. A
        prefill skips about 1/num_layers of the layers' work; its output rows get the sums
        of the full pass (in another order where the kernels see other shapes: rounding)."""
        hidden = self.model.embed_tokens(input_ids)
        cos, sin = self.rotary(positions, hidden.dtype)
        *layers, last = self.model.layers
        for layer in layers:
            hidden = layer(hidden, cos, sin)
        return self.model.norm(last(hidden, cos, sin, output_rows))

    def compute_logits(self, hidden: Tensor) -> Tensor:
        """Logits through oneDNN's reordered copy of the output projection where it applies
        (fp32 on the CPU, `onednn_linear.py`); else, for a few rows (a decode step), as
        weight @ hidden^T: the CPU BLAS reads the [vocab, hidden] weight row by row then,
        about twice as fast as the x @ W^T of `nn.Linear` for 2-8 rows of a large
        vocabulary. The same sums, in another order."""
        weight = self.lm_head.weight
        logits = self.lm_head.reordered.linear(hidden, weight)
        if logits is not None:
            return logits
        if SMALL_BATCH[0] <= hidden.shape[0] <= SMALL_BATCH[1] and weight.shape[0] >= 8192:
            return torch.mm(weight, hidden.t()).t()
        return self.lm_head(hidden)

    def prepare_weights(self) -> bool:
        """Make the linear layers' reordered copies now, once the weights are loaded (True
        where reordering applies); a weight changed later is reordered at its next use."""
        layers = [m for m in self.modules() if isinstance(m, onednn_linear.Linear)]
        return all([layer.prepare() for layer in layers])

    def attention_layers(self) -> list[Attention]:
        return [layer.self_attn.attn for layer in self.model.layers]
