"""Renderers: a request to a RenderedPrompt through the model's chat format (harmony, Hugging
Face templates in sandboxed Jinja, a plain layout), with provenance for every character."""
