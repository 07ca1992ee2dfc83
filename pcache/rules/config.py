"""`[tool.pcache.lint]` in pyproject.toml: select, extend-select, ignore, per-file-ignores, profile.

The configuration file is the nearest pyproject.toml at or above the working directory that has
a `[tool.pcache]` table (or the one named by `--config`). Errors are ConfigError (exit 2).
"""

from __future__ import annotations

import fnmatch
import os
import re

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pcache.cache.prices import Price, parse_prices
from pcache.defaults import PROFILE_NAMES
from pcache.errors import ConfigError, InputError, NestingError
from pcache.files import read_text
from pcache.prompt.shapes.fields import MAX_NESTING
from pcache.rules.groups import parse_apps
from pcache.rules.selection import SelectionInput

"""The caches `lint` prices findings for (`--profile` and `profile`)."""
KNOWN_KEYS = {"select", "extend-select", "ignore", "per-file-ignores", "profile", "tokenizer"}


@dataclass(slots=True)
class LintConfig:
    path: str | None = None
    selection: SelectionInput = field(default_factory=SelectionInput)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    profile: str | None = None
    tokenizer: str | None = None
    apps: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    """`[tool.pcache.apps]`: app name -> the `KEY=VALUE` matches of its requests
    (`--group-by app`)."""
    prices: dict[str, Price] = field(default_factory=dict)
    """`[tool.pcache.prices]`: model -> its input prices (`pcache.cache.prices`)."""

    def ignored_for(self, file: str) -> list[str]:
        """Codes ignored for `file` by per-file-ignores (a pattern starting with ! negates)."""
        codes: list[str] = []
        posix = PurePosixPath(file.replace(os.sep, "/"))
        for pattern, selectors in self.per_file_ignores.items():
            negate = pattern.startswith("!")
            glob = pattern[1:] if negate else pattern
            matched = (
                fnmatch.fnmatch(str(posix), glob)
                or fnmatch.fnmatch(posix.name, glob)
                or posix.match(glob)
            )
            if matched != negate:
                codes.extend(selectors)
        return codes


def find_config(start: Path) -> Path | None:
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.exists():
            try:
                data = _parse_toml(read_text(candidate, what="pyproject.toml"), str(candidate))
            except (InputError, tomllib.TOMLDecodeError):
                return candidate  # reported by load_config
            tool = data.get("tool")
            if isinstance(tool, dict) and "pcache" in tool:
                return candidate
    return None


def _codes(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"{where} must be a list of rule codes or prefixes")
    return list(value)


def _toml_error(source: str, error: Exception) -> InputError:
    """tomllib says where as "... (at line L, column C)"; pcache says `file:L:C: ...`."""
    text = str(error)
    where = re.search(r"\s*\(at line (\d+), column (\d+)\)$", text)
    if where is None:
        return InputError(source, f"invalid TOML: {text}")
    line, column = int(where.group(1)), int(where.group(2))
    return InputError(source, f"invalid TOML: {text[: where.start()]}", line, column)


def _parse_toml(text: str, source: str) -> dict[str, Any]:
    """`tomllib.loads`, with arrays and inline tables nested past `MAX_NESTING` refused where
    they pass it (tomllib parses them recursively, so it would run out of stack)."""
    depth = 0
    line, line_start, index, quote = 1, 0, 0, ""
    while index < len(text):
        char = text[index]
        if char == "\n":
            line, line_start = line + 1, index + 1
        elif quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "#":
            found = text.find("\n", index)
            index = len(text) if found < 0 else found
            continue
        elif char in "[{":
            depth += 1
            if depth > MAX_NESTING + 1:  # + 1: a table header's own bracket
                message = f"nests more than {MAX_NESTING} levels"
                raise NestingError(source, message, line, index - line_start + 1)
        elif char in "]}":
            depth = max(depth - 1, 0)
        index += 1
    return tomllib.loads(text)


def load_config(path: Path | None) -> LintConfig:
    if path is None:
        return LintConfig()
    text = read_text(path, what="pyproject.toml")
    try:
        data = _parse_toml(text, str(path))
    except tomllib.TOMLDecodeError as error:
        raise _toml_error(str(path), error) from None
    table: Any = data
    pcache: Any = {}
    for depth, key in enumerate(("tool", "pcache", "lint")):
        table = table.get(key, {})
        if not isinstance(table, dict):
            name = ".".join(("tool", "pcache", "lint")[: depth + 1])
            raise ConfigError(f"{path}: [{name}] must be a table")
        if key == "pcache":
            pcache = table
    lint = table
    unknown = sorted(set(lint) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) in [tool.pcache.lint]: {', '.join(unknown)}")
    where = f"{path}: [tool.pcache.lint]"
    config = LintConfig(path=str(path))
    if "apps" in pcache:
        config.apps = parse_apps(pcache["apps"], f"{path}: [tool.pcache.apps]")
    if "prices" in pcache:
        config.prices = parse_prices(pcache["prices"], f"{path}: [tool.pcache.prices]")
    if "select" in lint:
        config.selection.select = _codes(lint["select"], f"{where} select")
    config.selection.extend_select = _codes(lint.get("extend-select", []), f"{where} extend-select")
    config.selection.ignore = _codes(lint.get("ignore", []), f"{where} ignore")
    per_file = lint.get("per-file-ignores", {})
    if not isinstance(per_file, dict):
        raise ConfigError(f"{where} per-file-ignores must be a table of glob = [codes]")
    for pattern, codes in per_file.items():
        config.per_file_ignores[pattern] = _codes(codes, f"{where} per-file-ignores.{pattern}")
    for key in ("profile", "tokenizer"):
        if key in lint:
            if not isinstance(lint[key], str):
                raise ConfigError(f"{where} {key} must be a string")
            setattr(config, key, lint[key])
    if config.profile is not None and config.profile not in PROFILE_NAMES:
        raise ConfigError(
            f"{where} profile must be one of {', '.join(PROFILE_NAMES)}, got {config.profile!r}"
        )
    return config
