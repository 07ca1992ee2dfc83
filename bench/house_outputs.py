"""The outputs of a fixed set of commands, this tree against another: byte for byte.

    python bench/house_outputs.py --against REV     # REV: a commit of this repository
    python bench/house_outputs.py --tree DIR        # DIR: a checkout (its `pcache/` is run)

Each command runs as `python -m pcache ...` from this repository's root (so the samples are the
same), once per tree, with a fixed terminal width and no colour. Prints one line per command
(`same` or `DIFFERS`) and the first differing line of each that differs; exits 1 when any does.
`--keep DIR` leaves every output there (`DIR/<tree>/<n>.out`).

`replay --help` is compared as the set of its flags and their help text (the flags are
grouped in panels, so their order and headings may change); every other output byte for byte.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [
    "--help",
    *(
        f"{name} --help"
        for name in ("hash", "diff", "lint", "generate", "serve", "report", "trace", "trace synth")
    ),
    "replay --help",
    "diff samples/a.json samples/b.json",
    "diff samples/a.json samples/b.json --format json",
    "diff samples/a.json samples/b.json --hash-algo sha256 --block-size 32",
    "hash samples/a.json",
    "hash samples/b.json --hash-algo sha256 --format json",
    "lint samples/prompts",
    "lint samples/prompts -f concise",
    "lint samples/prompts -f json",
    "lint samples/prompts -f github",
    "lint samples/prompts -f sarif",
    "lint samples/prompts-clean",
    "lint samples/prompts --profile anthropic -f json",
    "lint samples/prompts/agent_log.jsonl --block-size 64 -f json",
    "replay samples/traces/requests_tiny.jsonl --simulate",
    "replay samples/traces/requests_tiny.jsonl --simulate --format json",
    "replay samples/traces/mooncake_tiny.jsonl --cache-blocks 8",
    "replay samples/traces/mooncake_tiny.jsonl --cache-blocks 8 --format json",
    "replay samples/traces/bailian_tiny.jsonl --policy radix --format json",
    "replay samples/traces/shared_prefix.jsonl --policy openai --format json",
    "replay samples/traces/shared_prefix.jsonl --capacity-sweep --format json",
    "replay samples/traces/mooncake_tiny.jsonl --concurrency timed --cache-blocks 16 -f json",
    "replay samples/traces/shared_prefix_hash_ids.jsonl --replicas 4 --router sglang",
    "replay samples/traces/shared_prefix_hash_ids.jsonl --replicas 4 --router sglang -f json",
    "replay samples/traces/mooncake_tiny.jsonl --replicas 1,2 --router round-robin,precise"
    " --cache-blocks 8 -f json",
    "replay samples/traces/mooncake_tiny.jsonl --replicas 2 --router llm-d --concurrency timed"
    " --cache-blocks 8 -f json",
    "replay samples/traces/requests_tiny.jsonl --cache-blocks 0",
    "replay samples/traces/requests_tiny.jsonl --simulate --block-size 0",
    "replay samples/traces/requests_tiny.jsonl --engine tpu",
    "replay samples/traces/requests_tiny.jsonl --replicas 0",
    "replay samples/traces/requests_tiny.jsonl --router nope --replicas 2",
    "replay missing.jsonl",
    "report samples/prompts --format json -o -",
    "report samples/traces/mooncake_tiny.jsonl --format json -o -",
    "trace synth --help",
]
ENVIRONMENT = {"COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1", "HF_HUB_OFFLINE": "1"}
VOLATILE = re.compile(r'"(wall_s|elapsed_s|seconds|generated_at|duration_s)": [0-9.e+-]+')
"""Fields that time the run itself (none of the compared outputs should have them)."""


def run_all(tree: Path, keep: Path | None) -> list[bytes]:
    """Every command's stdout, stderr and exit code, run with `tree`'s `pcache` package."""
    environment = {**os.environ, **ENVIRONMENT, "PYTHONPATH": str(tree)}
    outputs = []
    for number, command in enumerate(COMMANDS):
        done = subprocess.run(
            [sys.executable, "-P", "-m", "pcache", *command.split()],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            timeout=600,
        )
        output = b"%s\n--- stderr\n%s\n--- rc %d\n" % (done.stdout, done.stderr, done.returncode)
        outputs.append(VOLATILE.sub(r'"\1": 0', output.decode()).encode())
        if keep is not None:
            (keep / tree.name).mkdir(parents=True, exist_ok=True)
            (keep / tree.name / f"{number:02d}.out").write_bytes(outputs[-1])
    return outputs


def flags_and_help(text: bytes) -> list[str]:
    """A `--help` page's option entries (flag line and the help under it), sorted."""
    entries: list[list[str]] = []
    for line in text.decode().splitlines():
        if re.match(r"^  -", line):
            entries.append([line.strip()])
        elif entries and re.match(r"^\s{4,}\S", line):
            entries[-1].append(line.strip())
        elif entries and not line.strip():
            entries.append([])
    return sorted(" ".join(" ".join(entry).split()) for entry in entries if entry)


def checkout(revision: str, into: Path, paths: tuple[str, ...] = ("pcache",)) -> Path:
    """`paths` of `revision` of this repository, unpacked under `into`."""
    archive = subprocess.run(
        ["git", "archive", revision, *paths], cwd=ROOT, capture_output=True, check=True
    ).stdout
    tree = into / revision.replace("/", "_")
    tree.mkdir()
    with tempfile.TemporaryFile() as handle:
        handle.write(archive)
        handle.seek(0)
        with tarfile.open(fileobj=handle) as unpacked:
            unpacked.extractall(tree, filter="data")
    return tree


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    other = parser.add_mutually_exclusive_group(required=True)
    other.add_argument("--against", help="a commit of this repository")
    other.add_argument("--tree", type=Path, help="a checkout holding pcache/")
    parser.add_argument("--keep", type=Path, help="leave every output under this folder")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        before = arguments.tree or checkout(arguments.against, Path(scratch))
        old, new = run_all(before.resolve(), arguments.keep), run_all(ROOT, arguments.keep)
    differing = 0
    for command, was, now in zip(COMMANDS, old, new, strict=True):
        if command == "replay --help":
            same = flags_and_help(was) == flags_and_help(now)
        else:
            same = was == now
        print(f"{'same' if same else 'DIFFERS'}  pcache {command}")
        if not same:
            differing += 1
            for line_was, line_now in zip(was.splitlines(), now.splitlines(), strict=False):
                if line_was != line_now:
                    print(f"    was: {line_was.decode()[:160]}\n    now: {line_now.decode()[:160]}")
                    break
    print(f"{len(COMMANDS) - differing} of {len(COMMANDS)} outputs identical")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
