"""Hugging Face models: pcache's renderer (tokenizers + sandboxed Jinja) beside transformers.

For each fixture model (built from pinned packages, see tests/fixtures/build_tokenizers.py):
load time, and time to render + tokenize a chat request with tools (small) and a long one
(~100k tokens), for pcache (with provenance) and for `apply_chat_template(tokenize=True)`.
Medians of N runs, side by side in one run.

Run: python bench/bench_hf_template.py [--runs 5]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def median_time(function, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def long_request(base: dict, turns: int) -> dict:
    request = copy.deepcopy(base)
    sentence = "The quick brown fox jumps over the lazy dog, naïvely, at 10:42. "
    for turn in range(turns):
        role = "user" if turn % 2 == 0 else "assistant"
        request["messages"].append({"role": role, "content": f"Turn {turn}. " + sentence * 20})
    return request


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from transformers import AutoTokenizer

    from pcache.prompt.renderers.hf_template import load_hf_renderer
    from pcache.prompt.renderers.render import render
    from pcache.prompt.shapes.request import request_from_document
    from tests.fixtures.build_tokenizers import build
    from tests.fixtures.chat_corpus import CORPUS

    small = CORPUS["tools-one-call"]
    large = long_request(CORPUS["tools-varied-schemas"], 420)
    print(f"median of {args.runs} runs; seconds")
    print(f"{'model':<10} {'step':<28} {'pcache':>8} {'transformers':>13} {'ratio':>7}")
    for name, directory in build().items():
        ours = median_time(lambda d=directory: load_hf_renderer(str(d)), args.runs)
        theirs = median_time(lambda d=directory: AutoTokenizer.from_pretrained(str(d)), args.runs)
        print(f"{name:<10} {'load':<28} {ours:>8.3f} {theirs:>13.3f} {theirs / ours:>6.2f}x")
        renderer = load_hf_renderer(str(directory))
        tokenizer = AutoTokenizer.from_pretrained(str(directory))
        for label, document in (("small request", small), ("long request", large)):
            request = request_from_document(copy.deepcopy(document), "bench.json")
            tokens = render(request, renderer).num_tokens

            def reference(request=request, tokenizer=tokenizer):
                return tokenizer.apply_chat_template(
                    request.messages,
                    tools=request.tools or None,
                    add_generation_prompt=True,
                    tokenize=True,
                    return_dict=False,
                )

            ours = median_time(lambda r=request, rr=renderer: render(r, rr), args.runs)
            theirs = median_time(reference, args.runs)
            step = f"{label} ({tokens} tok)"
            print(f"{name:<10} {step:<28} {ours:>8.3f} {theirs:>13.3f} {theirs / ours:>6.2f}x")


if __name__ == "__main__":
    main()
