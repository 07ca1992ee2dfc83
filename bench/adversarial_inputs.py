"""An adversarial sweep of pcache's newer input surfaces, counted by class and outcome.

Each case is one `python -m pcache ...` child (a bounded wall time) over a hostile input:
corrupt and odd tables (Parquet, CSV, `--column`), broken wire shapes (Responses with cyclic
or missing `previous_response_id` chains, Gemini, Bedrock, OTel spans), hostile bytes (NUL,
a BOM, huge cells), odd fleet and router options (0, negative, NaN, huge, unknown), odd `-t`
presets, unreachable Ray and KV-event addresses, and `pcache serve` options.

A case passes when the command ends in time with exit code 0 or 1, or with 2 and a one-line
error on stderr that is not an internal error; and, whatever the exit code, its input is
unchanged and an output it failed to finish (`-o`) was never left behind. Anything else (a
traceback, `internal error:`, another exit code, a hang, a changed input, a partial output) is
a failure of the promise: the script exits 1 and names it.

Usage:
    python bench/adversarial_inputs.py                  # every case
    python bench/adversarial_inputs.py --only tables --format json
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHAPES = ROOT / "tests" / "data" / "shapes"
TIME_LIMIT_S = 60.0
HUGE_INDEX_KEY = "llm.input_messages.99999999999.message.role"
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello there"}]}


@dataclass(frozen=True)
class Case:
    """One hostile input: its class, its name, the files it writes, the command over them."""

    surface: str
    name: str
    files: dict[str, bytes]
    arguments: tuple[str, ...]
    limit_s: float = TIME_LIMIT_S


def jsonl(*rows) -> bytes:
    return b"".join(json.dumps(row).encode() + b"\n" for row in rows)


def parquet(columns: dict[str, list]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    pq.write_table(pa.table(columns), sink)
    return sink.getvalue()


def table_cases() -> list[Case]:
    good = parquet({"id": [1, 2], "body": [json.dumps(CHAT), json.dumps(CHAT)]})
    cases = {
        "random-bytes.parquet": os.urandom(4096),
        "truncated.parquet": good[: len(good) // 2],
        "magic-only.parquet": b"PAR1" + b"\0" * 64 + b"PAR1",
        "empty.parquet": b"",
        "no-json-column.parquet": parquet({"a": [1, 2], "b": ["x", "y"]}),
        "json-arrays.parquet": parquet({"body": ["[1, 2]", "[]"]}),
        "nul-cells.parquet": parquet({"body": ['{"messages": "\0"}', "\0" * 100]}),
        "huge-cell.parquet": parquet({"body": [json.dumps({**CHAT, "pad": "x" * 20_000_000})]}),
        "zero-rows.parquet": parquet({"body": pa_empty()}),
        "nul.csv": b"body\n" + b'"{""messages"": []}\0"\n' + b"\0\0\0\n",
        "bom.csv": b"\xef\xbb\xbfbody\n" + csv_cell(CHAT),
        "bom-utf16.csv": "body\n".encode("utf-16"),
        "ragged.csv": b"id,body\n1\n2," + csv_cell(CHAT).rstrip(b"\n") + b",extra,more\n",
        "header-only.csv": b"body\n",
        "empty.csv": b"",
        "not-json.csv": b"body\n{not json\n[1,\n",
        "latin1.csv": b"body\n\xff\xfe\xfd\n",
        "huge-line.csv": b"body\n" + b'"' + b"x" * 30_000_000 + b'"\n',
    }
    out = [
        Case("tables", name, {name: data}, ("lint", name, "--format", "json"))
        for name, data in cases.items()
    ]
    out.append(
        Case(
            "tables",
            "--column missing",
            {"t.parquet": good},
            ("lint", "t.parquet", "--column", "nope"),
        )
    )
    out.append(
        Case(
            "tables",
            "--column non-json",
            {"t.parquet": good},
            ("lint", "t.parquet", "--column", "id"),
        )
    )
    out.append(
        Case("tables", "--column empty", {"t.parquet": good}, ("lint", "t.parquet", "--column", ""))
    )
    out.append(Case("tables", "FILE#missing", {"t.parquet": good}, ("lint", "t.parquet#nope")))
    out.append(
        Case(
            "tables",
            "replay corrupt -o",
            {"bad.parquet": b"PAR1junk"},
            ("replay", "bad.parquet", "--simulate", "-o", "out.json"),
        )
    )
    return out


def pa_empty() -> list:
    return []


def csv_cell(value) -> bytes:
    return b'"' + json.dumps(value).replace('"', '""').encode() + b'"\n'


def responses(rid: str, previous: str | None, text: str = "hi") -> dict:
    body = {"model": "gpt-5", "input": [{"role": "user", "content": text}]}
    if previous is not None:
        body["previous_response_id"] = previous
    output = [
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}
    ]
    return {
        "url": "https://api.openai.com/v1/responses",
        "body": body,
        "response": {"id": rid, "output": output},
    }


def shape_cases() -> list[Case]:
    deep = {"model": "gemini", "contents": [{"role": "user", "parts": [{"text": "x"}]}]}
    cases = {
        "cycle.jsonl": jsonl(responses("a", "b"), responses("b", "a")),
        "self-cycle.jsonl": jsonl(responses("a", "a")),
        "missing-previous.jsonl": jsonl(responses("a", "zzz")),
        "long-chain.jsonl": jsonl(
            *(responses(f"r{i}", f"r{i - 1}" if i else None) for i in range(1000))
        ),
        "previous-not-string.jsonl": jsonl(
            {
                **responses("a", None),
                "body": {"model": "m", "input": "x", "previous_response_id": 5},
            }
        ),
        "response-id-dict.jsonl": jsonl({**responses("a", None), "response": {"id": {}}}),
        "response-output-str.jsonl": jsonl(
            responses("a", None),
            {**responses("b", "a"), "response": {"id": "b", "output": "x"}},
            responses("c", "b"),
        ),
        "input-items-junk.jsonl": jsonl({"body": {"model": "m", "input": [5, None, {"type": 3}]}}),
        "gemini-contents-str.jsonl": jsonl({"body": {"contents": "hello"}}),
        "gemini-parts-junk.jsonl": jsonl(
            {"body": {"contents": [{"role": "user", "parts": [None, 5, {"text": 7}]}]}}
        ),
        "gemini-system-junk.jsonl": jsonl({"body": {**deep, "systemInstruction": 5}}),
        "bedrock-content-str.jsonl": jsonl(
            {"body": {"messages": [{"role": "user", "content": "x"}]}}
        ),
        "bedrock-blocks-junk.jsonl": jsonl(
            {
                "body": {
                    "messages": [
                        {"role": "user", "content": [{"toolUse": 5}, {"cachePoint": "x"}, {}]}
                    ],
                    "system": [{"text": None}],
                    "toolConfig": {"tools": [5]},
                }
            }
        ),
        "otel-junk.jsonl": jsonl(
            {"resourceSpans": 5},
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {
                                        "attributes": [
                                            {
                                                "key": "gen_ai.input.messages",
                                                "value": {"stringValue": "{broken"},
                                            }
                                        ]
                                    }
                                ]
                            }
                        ]
                    }
                ]
            },
        ),
        "otel-values-junk.jsonl": jsonl(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {
                                        "name": "chat",
                                        "attributes": [
                                            {
                                                "key": "gen_ai.operation.name",
                                                "value": {"stringValue": "chat"},
                                            },
                                            {
                                                "key": "gen_ai.prompt.0.content",
                                                "value": {"intValue": "x"},
                                            },
                                            {"key": 5, "value": None},
                                        ],
                                    }
                                ]
                            }
                        ]
                    }
                ]
            }
        ),
        "openinference-junk.jsonl": jsonl(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {
                                        "attributes": [
                                            {
                                                "key": HUGE_INDEX_KEY,
                                                "value": {"stringValue": "user"},
                                            }
                                        ]
                                    }
                                ]
                            }
                        ]
                    }
                ]
            }
        ),
        "nul-bytes.jsonl": b'{"messages": [{"role": "user", "content": "a\\u0000b"}]}\n\0\0\n',
        "bom.jsonl": b"\xef\xbb\xbf" + jsonl(CHAT),
        "huge-cell.jsonl": jsonl(
            {**CHAT, "messages": [{"role": "user", "content": "x" * 4_000_000}]}
        ),
    }
    return [
        Case("shapes", name, {name: data}, ("lint", name, "--format", "json"))
        for name, data in cases.items()
    ] + [
        Case(
            "shapes",
            "replay cycle -o",
            {"c.jsonl": cases["cycle.jsonl"]},
            ("replay", "c.jsonl", "--simulate", "-o", "out.json"),
        ),
    ]


FLEET_VALUES = {
    "--replicas": ["0", "-1", "nan", "1e9", "100000000", "1,,2", "x", "2.5", ""],
    "--router": ["nope", "", "round-robin,,", "sglang,nope"],
    "--router-param": [
        "nope.x=1",
        "sglang.nope=1",
        "prefix-hash.prefix_chars=-1",
        "prefix-hash.prefix_chars=nan",
        "prefix-hash.prefix_chars=1e400",
        "prefix-hash.prefix_chars=abc",
        "=",
        "sglang",
        "ray.imbalanced_threshold=inf",
    ],
    "--prefill-slots": ["0", "-1", "nan", "99999999999999999999"],
    "--publish-blocks": ["nope", ""],
    "--jobs": ["0", "-1", "nan", "100000"],
    "--chars-per-token": ["0", "-1", "nan", "inf", "1e-300"],
}


def fleet_cases() -> list[Case]:
    trace = (ROOT / "samples" / "traces" / "requests_tiny.jsonl").read_bytes()
    base = ("replay", "t.jsonl", "--simulate", "--format", "json", "-o", "out.json")
    cases = []
    for flag, values in FLEET_VALUES.items():
        for value in values:
            extra: tuple[str, ...] = (flag, value)
            if flag in ("--router", "--chars-per-token"):
                extra += ("--replicas", "2")
            if flag == "--router-param":
                router = value.partition(".")[0] if "." in value else "sglang"
                extra += ("--replicas", "2", "--router", router)
            if flag in ("--prefill-slots", "--publish-blocks"):
                extra += ("--replicas", "2", "--router", "sglang", "--concurrency", "timed")
            cases.append(Case("fleet", f"{flag} {value!r}", {"t.jsonl": trace}, base + extra))
    for value in ("ray://10.255.255.1:10001", "10.255.255.1:6379", "nope://x", ""):
        cases.append(
            Case(
                "fleet",
                f"--ray-address {value!r}",
                {"t.jsonl": trace},
                (*base, "--replicas", "2", "--executor", "ray", "--ray-address", value),
                limit_s=120,
            )
        )
    cases.append(Case("fleet", "--executor nope", {"t.jsonl": trace}, (*base, "--executor", "x")))
    return cases


def preset_cases() -> list[Case]:
    trace = jsonl(CHAT)
    values = ["nope", "", "../../etc", "tiny\0", "x" * 5000, "/dev/null", "-", "tiny,tiny"]
    return [
        Case("presets", f"-t {value[:20]!r}", {"t.jsonl": trace}, ("lint", "t.jsonl", "-t", value))
        for value in values
        if "\0" not in value
    ]


def endpoint_cases() -> list[Case]:
    trace = (ROOT / "samples" / "traces" / "requests_tiny.jsonl").read_bytes()
    base = (
        "replay",
        "t.jsonl",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--request-timeout",
        "5",
        "--timeout",
        "2",
        "--max-prompt-tokens",
        "50",
    )
    kv = [
        "tcp://10.255.255.1:5557",
        "tcp://nonexistent.invalid:5557",
        "tcp://127.0.0.1:0",
        "tcp://*:x",
        "ipc:///nonexistent/dir/sock",
        "udp://x:1",
    ]
    cases = [
        Case(
            "endpoint",
            f"--kv-events {value}",
            {"t.jsonl": trace},
            (*base, "--kv-events", value),
            120,
        )
        for value in kv
    ]
    for value in ("http://127.0.0.1:9,http://[::1", "ftp://x", "http://10.255.255.1:1"):
        cases.append(
            Case(
                "endpoint",
                f"--replica-metrics {value}",
                {"t.jsonl": trace},
                (*base, "--replica-metrics", value),
            )
        )
    return cases


def serve_cases() -> list[Case]:
    common = ("serve", "--model", "tiny", "--port", "0")
    values = [
        ("--kv-events", "tcp://nonexistent.invalid:5557"),
        ("--kv-events", "99999"),
        ("--kv-events", "tcp://*:x"),
        ("--api-key", ""),
        ("--metrics-auth",),
        ("--host", "256.0.0.1"),
        ("--host", "nonexistent.invalid"),
        ("--port", "-1"),
        ("--max-num-seqs", "0"),
        ("--block-size", "3"),
        ("--engine-cpus", "99999"),
        ("--kv-cache-tokens", "1"),
        ("--model", "nope"),
    ]
    return [Case("serve", " ".join(value), {}, (*common, *value), 20) for value in values]


SURFACES = {
    "tables": table_cases,
    "shapes": shape_cases,
    "fleet": fleet_cases,
    "presets": preset_cases,
    "endpoint": endpoint_cases,
    "serve": serve_cases,
}


def digest(folder: Path) -> dict[str, str]:
    return {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest()
        for path in folder.iterdir()
        if path.is_file()
    }


def run_case(case: Case) -> tuple[str, str]:
    """(outcome, detail): `ok`, `refused` (exit 2, one line) or `FAIL: why`."""
    with tempfile.TemporaryDirectory() as directory:
        folder = Path(directory)
        for name, data in case.files.items():
            (folder / name).write_bytes(data)
        before = digest(folder)
        env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1", NO_COLOR="1")
        started = time.monotonic()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "pcache", *case.arguments],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=case.limit_s,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as expired:
            said = expired.stderr or b""
            said = said.decode(errors="replace") if isinstance(said, bytes) else said
            if case.surface == "serve" and "pcache: serving" in said:
                return "ok", "started and kept serving (stopped by the time limit)"
            return "FAIL", f"no end within {case.limit_s:g} s"
        seconds = time.monotonic() - started
        after = digest(folder)
        produced = set(after) - set(before)
        stderr = done.stderr.strip()
        if any(after.get(name) != value for name, value in before.items()):
            return "FAIL", "an input changed"
        if "Traceback" in done.stderr or "internal error" in done.stderr:
            return "FAIL", stderr.splitlines()[-1][:200] if stderr else "traceback"
        if done.returncode in (0, 1):
            return "ok", f"exit {done.returncode} in {seconds:.1f} s"
        if done.returncode != 2:
            return "FAIL", f"exit code {done.returncode}: {stderr[-200:]}"
        if produced:
            return "FAIL", f"exit 2 left {sorted(produced)}"
        lines = [line for line in stderr.splitlines() if line.strip()]
        if len(lines) > 3:  # one error line, perhaps a warning or a hint beside it
            return "FAIL", f"{len(lines)} lines on stderr: {lines[-1][:150]}"
        return "refused", (lines[-1][:160] if lines else "(nothing on stderr)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(SURFACES), action="append")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    table: dict[str, collections.Counter] = {}
    rows = []
    for surface in args.only or SURFACES:
        for case in SURFACES[surface]():
            outcome, detail = run_case(case)
            table.setdefault(surface, collections.Counter())[outcome] += 1
            rows.append(
                {"surface": surface, "case": case.name, "outcome": outcome, "detail": detail}
            )
            if args.format == "text":
                print(f"{surface:9} {outcome:8} {case.name[:44]:44} {detail}", flush=True)
    failures = [row for row in rows if row["outcome"] == "FAIL"]
    if args.format == "json":
        print(json.dumps({"surfaces": {k: dict(v) for k, v in table.items()}, "cases": rows}))
    else:
        for surface, counts in table.items():
            print(f"{surface}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        print(f"{len(rows)} cases, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
