"""One check, and one message style, for every number a user gives pcache.

`check_number("--rate", value, above=0)` returns the value or raises an `OptionError` such as
`--rate must be a finite number, got nan` or `--rate must be greater than 0, got -1`. Options,
configuration values and API arguments all go through it; `number_problem` says what is wrong
without raising, for a check that names its field itself.
"""

from __future__ import annotations

import math

from pcache.errors import OptionError


def _shown(value: float) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def number_problem(
    value: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> str | None:
    """What is wrong with `value` (`must be at least 1, got 0`), or None when it is finite and
    within the bounds (`above` is an exclusive minimum)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {_shown(value)}"
    low_ok = (minimum is None or value >= minimum) and (above is None or value > above)
    if low_ok and (maximum is None or value <= maximum):
        return None
    if above is not None and maximum is None:
        expected = f"greater than {_shown(above)}"
    elif above is not None:
        expected = f"greater than {_shown(above)} and at most {_shown(maximum)}"
    elif minimum is not None and maximum is not None:
        expected = f"between {_shown(minimum)} and {_shown(maximum)}"
    elif minimum is not None:
        expected = f"at least {_shown(minimum)}"
    else:
        expected = f"at most {_shown(maximum)}"
    return f"must be {expected}, got {_shown(value)}"


def check_number(
    name: str,
    value: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
) -> float:
    """`value` when it is finite and within the bounds; `name` is a flag (`--rate`) or a key
    of a file (`hidden_size`), and the error's field is that name in snake case."""
    problem = number_problem(value, minimum=minimum, maximum=maximum, above=above)
    if problem is not None:
        raise OptionError(name.lstrip("-").replace("-", "_"), problem, flag=name)
    return value
