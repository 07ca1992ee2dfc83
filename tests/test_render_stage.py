"""Lint renders a chunk of requests and encodes their new text together, on `--jobs` threads:
the findings and numbers are those of `--jobs 1`, and those of `tokenizers` itself."""

from __future__ import annotations

import json
import random

import pytest

from pcache.errors import InputError
from pcache.pipeline import RENDER_CHUNK, RenderStage, Settings
from pcache.prompt.renderers.render import prompt_token_ids, resolve_renderer
from pcache.prompt.shapes.request import request_from_document
from pcache.prompt.tokenizers.segment_cache import SegmentCachedRenderer
from tests.conftest import run_pcache
from tests.fixtures import hf_model_dir

WORDS = [
    *("cache", "prefix", "token", "block", "café", "naïve", "日本語", "😀"),
    *("<|im_end|>", "<|eot_id|>", "<|end|>", "42", "3.14"),
]


def generated_log(path, requests: int = 3 * RENDER_CHUNK + 5, seed: int = 3) -> None:
    """Sessions whose turns repeat their history, single-turn requests with unique text, a
    request the Llama template refuses, and a line that is not JSON."""
    rng = random.Random(seed)

    def words(count: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(count))

    system = words(400)
    lines = []
    history: list[dict] = [{"role": "system", "content": system}]
    for number in range(requests):
        if number % 3:
            history.append({"role": "user", "content": words(rng.randint(5, 300))})
            messages = list(history)
            history.append({"role": "assistant", "content": words(rng.randint(5, 50))})
            if len(history) > 12:
                history = history[:1]
        else:
            user = {"role": "user", "content": f"{number} " + words(rng.randint(100, 600))}
            messages = [{"role": "system", "content": system}, user]
        lines.append(json.dumps({"session_id": f"s{number % 7}", "messages": messages}))
    lines.insert(40, json.dumps({"messages": [{"role": "assistant", "content": "no user"}]}))
    lines.insert(77, "{not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def lint_json(log, *args: str, env_off: bool = False) -> dict:
    import os

    previous = os.environ.get("PCACHE_TOKENIZERS")
    if env_off:
        os.environ["PCACHE_TOKENIZERS"] = "1"
    try:
        done = run_pcache("lint", log, "--format", "json", "--exit-zero", *args, timeout=300)
    finally:
        if previous is None:
            os.environ.pop("PCACHE_TOKENIZERS", None)
        else:
            os.environ["PCACHE_TOKENIZERS"] = previous
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    report = json.loads(done.stdout)
    report["summary"].pop("stage_seconds", None)
    return report


@pytest.mark.parametrize("tokenizer", ["gpt-oss", "llama3.1", "qwen2.5"])
def test_lint_with_jobs_equals_jobs_1(tmp_path, tokenizer: str):
    log = tmp_path / "log.jsonl"
    generated_log(log)
    name = tokenizer if tokenizer == "gpt-oss" else str(hf_model_dir(tokenizer))
    one = lint_json(log, "-t", name, "--jobs", "1")
    assert one["summary"]["requests"] > 3 * RENDER_CHUNK
    assert one == lint_json(log, "-t", name, "--jobs", "4")
    if tokenizer != "gpt-oss":  # and equal to encoding every piece with `tokenizers`
        assert one == lint_json(log, "-t", name, "--jobs", "3", env_off=True)


@pytest.mark.parametrize("tokenizer", ["gpt-oss", "qwen3"])
def test_a_prepared_chunk_gives_each_requests_own_ids(tmp_path, tokenizer: str):
    """`RenderStage.prepare` then `encode_segments` per request: the ids of rendering and
    encoding each request alone, with a fresh cache."""
    log = tmp_path / "log.jsonl"
    generated_log(log, requests=RENDER_CHUNK)
    name = tokenizer if tokenizer == "gpt-oss" else str(hf_model_dir(tokenizer))
    settings = Settings(tokenizer=name)
    requests = [
        request_from_document(json.loads(line), str(log), number)
        for number, line in enumerate(log.read_text().splitlines(), 1)
        if line.startswith('{"')
    ]
    renderer = SegmentCachedRenderer(resolve_renderer(name))
    stage = RenderStage(renderer, settings.render_options(), jobs=4)
    prepared = stage.prepare(requests)
    for request, text in zip(requests, prepared, strict=True):
        alone = SegmentCachedRenderer(resolve_renderer(name))
        try:
            expected = prompt_token_ids(request, alone, settings.render_options())
        except InputError:  # the template refuses it: left for lint to report
            assert text is None
            continue
        assert text is not None
        assert renderer.encode_segments(text[0])[0] == expected
    renderer.check_integrity()


def test_verbose_names_the_encoder(tmp_path):
    log = tmp_path / "log.jsonl"
    generated_log(log, requests=5)
    done = run_pcache("lint", log, "-t", hf_model_dir("llama3.1"), "--verbose", "--exit-zero")
    assert done.returncode == 0, done.stderr
    assert b"encoded by tiktoken (byte-level BPE converted from tokenizer.json)" in done.stderr
    done = run_pcache("lint", log, "--verbose", "--exit-zero")
    assert b"pcache: tokenizer gpt-oss: encoded by tiktoken (o200k_harmony)" in done.stderr
