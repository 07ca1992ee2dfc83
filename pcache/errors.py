"""Typed errors raised by pcache's core; `pcache.cli` turns them into messages and exit codes."""

from __future__ import annotations


class PcacheError(Exception):
    """Base class of every error pcache reports to a user (exit code 2)."""

    exit_code = 2


class InputError(PcacheError):
    """A user's input file cannot be read or understood.

    `json_path` names the offending value inside a JSON document (its line and column, when
    known, are found from it by the reader that still holds the text).
    """

    def __init__(
        self,
        source: str,
        message: str,
        line: int | None = None,
        column: int | None = None,
        json_path: str | None = None,
    ):
        self.source = source
        self.message = message
        self.line = line
        self.column = column
        self.json_path = json_path
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: {self.message}"


class UsageError(PcacheError):
    """An option or argument is invalid."""


class ConfigError(PcacheError):
    """A configuration file (pyproject.toml) is invalid."""


class TokenizerError(PcacheError):
    """A tokenizer or chat template cannot be loaded or applied."""


class RequestTemplateError(InputError, TokenizerError):
    """A chat template refused one request, failed on it or went past its bounds: an error of
    that request (its file and line), which lint reports and replay skips like a bad line."""


class EngineError(PcacheError):
    """The built-in engine cannot run the requested model or workload."""
