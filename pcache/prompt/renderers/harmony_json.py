"""JSON values written as OpenAI's harmony renderer writes them in tool signatures.

Compact (no spaces), non-ASCII kept, and floats in the shortest form with bare exponents
(`1e20`, `1e-7`, `0.00001`), after the reference's best-effort reading of the number.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

_U64_MAX = 2**64 - 1
_POWERS_OF_TEN = [float(f"1e{k}") for k in range(309)]


def compact_json(value: Any) -> str:
    """JSON without spaces, non-ASCII kept, floats in shortest form with bare exponents."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value) if -(2**63) <= value < 2**64 else _float_text(_read_back(str(value)))
    if isinstance(value, float):
        return _float_text(_read_back(repr(value)))
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}:{compact_json(v)}" for k, v in value.items()
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(compact_json(item) for item in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def _read_back(number: str) -> float:
    """The float the reference renderer gets for a JSON number, as its JSON reader computes it.

    That reader is best-effort, not correctly rounded: it keeps the digits that fit in 64 bits,
    converts them to a float and scales by one power of ten, so some values move by one unit in
    the last place. Their defaults are then written with those digits, and so are pcache's.
    """
    if number in ("inf", "-inf", "nan"):
        return float(number)
    negative = number.startswith("-")
    mantissa, _, exponent_text = number.lstrip("-").lower().partition("e")
    whole, _, fraction = mantissa.partition(".")
    significand, exponent, overflowed = 0, 0, False
    for digit in whole:
        if overflowed or significand * 10 + int(digit) > _U64_MAX:
            overflowed, exponent = True, exponent + 1
        else:
            significand = significand * 10 + int(digit)
    for digit in fraction:
        if overflowed or significand * 10 + int(digit) > _U64_MAX:
            overflowed = True
        else:
            significand, exponent = significand * 10 + int(digit), exponent - 1
    exponent += int(exponent_text or 0)
    value = float(significand)
    while True:
        if abs(exponent) <= 308:
            scale = _POWERS_OF_TEN[abs(exponent)]
            value = value * scale if exponent >= 0 else value / scale
            break
        if value == 0.0 or exponent > 0:
            value = value * float("inf") if exponent > 0 else value
            break
        value, exponent = value / 1e308, exponent + 308
    return -value if negative else value


def _float_text(value: float) -> str:
    """Shortest round-trip digits laid out as Rust's `ryu` does (`1e20`, `1e-7`, `0.00001`)."""
    if value != value or value in (float("inf"), float("-inf")):
        return "null"
    sign = "-" if str(value).startswith("-") else ""
    if value == 0:
        return f"{sign}0.0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    digits = "".join(map(str, digit_tuple))
    stripped = digits.rstrip("0")
    exponent = int(exponent) + len(digits) - len(stripped)
    digits = stripped
    point = len(digits) + exponent  # the value is 0.DIGITS x 10^point
    if exponent >= 0 and point <= 16:
        return f"{sign}{digits}{'0' * exponent}.0"
    if 0 < point <= 16:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -5 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    mantissa = digits if len(digits) == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{mantissa}e{point - 1}"
