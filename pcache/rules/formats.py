"""Lint results as machine formats: JSON, GitHub Actions annotations and SARIF 2.1.0.

Each function returns the document (`bytes` of JSON, or the annotation lines as `str`); the CLI
writes it out (`pcache lint --format json|github|sarif`, `--list-rules`, `--explain`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import PurePosixPath, PureWindowsPath
from urllib.parse import quote

import orjson

from pcache.version import __version__

INFORMATION_URI = "https://github.com/pcache/pcache"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def _json(data: object) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)


def rule_dict(rule) -> dict[str, object]:
    """One rule as `--list-rules --format json` lists it."""
    return {
        "code": rule.code,
        "name": rule.name,
        "severity": rule.severity,
        "summary": rule.summary,
        "fix_availability": rule.fix_availability,
        "default": rule.default,
    }


def rules_json(rules: Iterable) -> bytes:
    return _json([rule_dict(rule) for rule in rules])


def explanation_json(rule, text: str) -> bytes:
    return _json({**rule_dict(rule), "explanation": text})


def report_json(report) -> bytes:
    """`--format json`: the findings and the summary."""
    return _json(
        {
            "findings": [d.as_dict() for d in report.diagnostics],
            "summary": report.summary.as_dict(),
        }
    )


def _escape_github(text: str, property: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if property:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def github_annotations(report) -> str:
    """`--format github`: one workflow command per finding, each line ending in a newline."""
    lines = []
    for d in report.diagnostics:
        level = GITHUB_LEVEL[d.severity]
        title = _escape_github(f"pcache ({d.code})", property=True)
        file = _escape_github(d.file, property=True)
        message = _escape_github(f"{d.code} {d.name}: {d.message} [{d.json_path}]")
        lines.append(
            f"::{level} title={title},file={file},line={d.line},col={d.column}::{message}\n"
        )
    return "".join(lines)


def artifact_uri(path: str) -> str:
    """A file's SARIF `uri` (RFC 3986, as SARIF 2.1.0 requires): a relative path becomes a
    percent-encoded relative reference, an absolute path a `file:` URI."""
    if PureWindowsPath(path).is_absolute() and not PurePosixPath(path).is_absolute():
        return PureWindowsPath(path).as_uri()
    posix = path.replace(os.sep, "/")
    if posix.startswith("/"):
        return "file://" + quote(posix, safe="/")
    return quote(posix, safe="/")  # ':' is encoded too: a first segment is never a scheme


def sarif_document(report) -> dict[str, object]:
    """`--format sarif`: one run, every rule described, one result per finding."""
    from pcache.rules import RULES, documentation

    used = sorted({d.code for d in report.diagnostics} | {c for c in RULES if c != "PC000"})
    index = {code: position for position, code in enumerate(used)}
    rules = []
    for code in used:
        rule = RULES[code]
        rules.append(
            {
                "id": code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary},
                "fullDescription": {"text": rule.summary},
                "help": {"text": documentation(code)},
                "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
                "properties": {"tags": ["prompt-caching"]},
            }
        )
    results = []
    for d in report.diagnostics:
        result = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": SARIF_LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": artifact_uri(d.file)},
                        "region": {"startLine": d.line, "startColumn": d.column},
                    },
                    "logicalLocations": [
                        {"fullyQualifiedName": d.json_path or d.request, "kind": "member"}
                    ],
                }
            ],
            "properties": {
                "request": d.request,
                "json_path": d.json_path,
                "token_position": d.token_position,
                "tokens_reprefilled": d.tokens_reprefilled,
            },
        }
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "pcache",
                        "version": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }


def report_sarif(report) -> bytes:
    return _json(sarif_document(report))
