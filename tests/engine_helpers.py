"""Helpers of the engine tests: transformers checkpoints with the shapes of the engine's presets."""

from __future__ import annotations

from pathlib import Path

import torch

from pcache.models import preset_config


def save_reference_checkpoint(preset: str, directory: Path, seed: int = 0, **overrides):
    """A transformers model of a preset's shape with random weights, saved with save_pretrained.

    Every parameter is drawn afresh (norms around 1, biases non-zero), so a weight the engine
    loads into the wrong place cannot go unnoticed. Returns the transformers model (eval, fp32).
    """
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.initialization import no_init_weights

    data = {**preset_config(preset), **overrides}
    data.pop("architectures")
    config = AutoConfig.for_model(data.pop("model_type"), **data)
    config.eos_token_id = None
    torch.manual_seed(seed)
    with no_init_weights():  # every parameter is drawn below
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.tie_weights()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith("norm.weight"):
                parameter.normal_(1.0, 0.1, generator=generator)
            else:
                parameter.normal_(0.0, 0.05, generator=generator)
    model.eval()
    model.save_pretrained(directory)
    return model


def reference_greedy(model, prompt: list[int], num_tokens: int):
    """transformers' own greedy generation: (token ids, logits of each step [steps, vocab])."""
    with torch.no_grad():
        output = model.generate(
            torch.tensor([prompt]),
            attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
            do_sample=False,
            max_new_tokens=num_tokens,
            min_new_tokens=num_tokens,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    tokens = output.sequences[0, len(prompt) :].tolist()
    return tokens, torch.stack([step[0] for step in output.logits]).float()


def reference_greedy_batch(model, prompts: list[list[int]], num_tokens: int):
    """transformers' greedy generation of a left-padded batch: [(token ids, logits)] per prompt."""
    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    with torch.no_grad():
        output = model.generate(
            input_ids,
            attention_mask=mask,
            do_sample=False,
            max_new_tokens=num_tokens,
            min_new_tokens=num_tokens,
            output_logits=True,
            return_dict_in_generate=True,
            pad_token_id=0,
        )
    logits = torch.stack(output.logits, dim=1).float()
    return [(output.sequences[i, width:].tolist(), logits[i]) for i in range(len(prompts))]
