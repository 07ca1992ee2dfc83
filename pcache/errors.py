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


class OptionError(UsageError):
    """One option's value is refused: `field` names it (as the library's keyword and the
    options dataclass's field spell it), `reason` says what is wrong with the value.

    The message names the option by its command-line flag (`--block-size must be at least 1,
    got 0`), as the commands print it; `worded(name)` names it otherwise (the library API says
    `block_size must be ...`). A reason that begins with a colon follows the name directly;
    `lead` comes before the name (`unknown --hash-algo 'md5' ...`)."""

    def __init__(self, field: str, reason: str, *, flag: str | None = None, lead: str = ""):
        self.field = field
        self.reason = reason
        self.flag = flag or "--" + field.replace("_", "-")
        self.lead = lead
        super().__init__(self.worded(self.flag))

    def worded(self, name: str) -> str:
        """The message, naming the option `name`."""
        separator = "" if self.reason.startswith(":") else " "
        return f"{self.lead}{name}{separator}{self.reason}"


class ConfigError(PcacheError):
    """A configuration file (pyproject.toml) is invalid."""


class TokenizerError(PcacheError):
    """A tokenizer or chat template cannot be loaded or applied."""


class RequestTemplateError(InputError, TokenizerError):
    """A chat template refused one request, failed on it or went past its bounds: an error of
    that request (its file and line), which lint reports and replay skips like a bad line."""


class EngineError(PcacheError):
    """The built-in engine cannot run the requested model or workload."""


class NestingError(InputError, ValueError):
    """A value nests lists and objects deeper than pcache reads (`MAX_NESTING` levels), in a
    file or in memory."""


class NotJsonError(InputError, TypeError):
    """A value given in memory is not one a JSON document can hold: a set, an arbitrary
    object, NaN or an infinity, a key that is not a string, text that is not Unicode."""


class CycleError(InputError, ValueError):
    """A value given in memory contains itself (a dict or list inside itself)."""


class ArgumentError(InputError, UsageError):
    """An argument of a library function (`pcache.lint`, ...) is invalid: the message names
    the function and the argument, as in `pcache.lint: block_size must be at least 1, got 0`.

    `command_line` words the same refusal as the command line does, naming the flag
    (`--block-size must be ...`): the commands call these functions and print that."""

    def __init__(self, function: str, argument: str, message: str, command_line: str | None = None):
        self.function = function
        self.argument = argument
        """The argument's name ("" when the message names no single one)."""
        self.command_line = command_line or message
        super().__init__(f"pcache.{function}", message)


class ArgumentTypeError(ArgumentError, TypeError):
    """An argument of a library function has a type it does not take."""


class ArgumentValueError(ArgumentError, ValueError):
    """An argument of a library function has the right type and a value it does not take."""
