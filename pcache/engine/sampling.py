"""Next-token choice: greedy by default, temperature sampling with a seeded generator."""

from __future__ import annotations

import torch


class Sampler:
    """Picks one token per row of logits; rows with temperature 0 are greedy."""

    def __init__(self, seed: int, device: torch.device) -> None:
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, logits: torch.Tensor, temperatures: list[float]) -> list[int]:
        greedy = logits.argmax(dim=-1)
        if not any(temperature > 0 for temperature in temperatures):
            return greedy.tolist()
        scale = torch.tensor([t if t > 0 else 1.0 for t in temperatures], device=logits.device)
        probabilities = torch.softmax(logits.float() / scale[:, None], dim=-1)
        sampled = torch.multinomial(probabilities, 1, generator=self.generator).squeeze(1)
        is_greedy = torch.tensor([t <= 0 for t in temperatures], device=logits.device)
        return torch.where(is_greedy, greedy, sampled).tolist()
