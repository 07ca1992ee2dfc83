"""The endpoint's URL: its routes (the query kept on each), and what of it is never printed.

A URL may carry credentials: `http://user:password@host/v1` (sent as basic auth) or a query
parameter whose name says it is one (`?api_key=...`, `key`, `token`, `secret`, `password`,
`sig`, ...). `masked` is the URL as every output shows it, those values replaced by `***`;
`secrets_of` lists the values themselves, so that `scrub` can take them out of any message
(an error a server or the HTTP library wrote may quote the URL).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, unquote, urlsplit, urlunsplit

MASK = "***"
SECRET_NAME = re.compile(r"key|token|secret|pass|auth|sig|credential|session", re.IGNORECASE)
"""A query parameter whose name matches holds a credential."""
USERINFO = re.compile(r"(?<=//)([^/?#@]*)@")
"""The `user:password@` of a URL, found in text even where the URL does not parse."""


def _is_secret_parameter(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def masked(url: str) -> str:
    """`url` with its user, password and credential-like query values replaced by `***`."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL: its text, with what looks like a user and password masked
        return USERINFO.sub(f"{MASK}@", url, count=1)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rsplit('@', 1)[1]}"
    query = parts.query
    if query:
        pieces = []
        for piece in query.split("&"):
            name, equals, _ = piece.partition("=")
            secret = equals and _is_secret_parameter(unquote(name))
            pieces.append(f"{name}={MASK}" if secret else piece)
        query = "&".join(pieces)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secrets_of(url: str) -> list[str]:
    """The credential values `url` carries, raw and percent-encoded (longest first)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        userinfo = USERINFO.search(url)
        values = userinfo.group(1).split(":", 1) if userinfo else []
        return sorted((value for value in values if value), key=len, reverse=True)
    found: set[str] = set()
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        for value in userinfo.split(":", 1):
            found.update((value, unquote(value)))
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if _is_secret_parameter(name):
            found.update((value, quote(value, safe=""), quote(value)))
    return sorted((value for value in found if value), key=len, reverse=True)


def scrub(message: str, secrets: Iterable[str]) -> str:
    """`message` with every secret replaced by `***`, and written as text a terminal shows as
    it is: a character that is not printable (an escape sequence a server sent) becomes its
    `\\x..` escape."""
    for secret in secrets:
        if secret:
            message = message.replace(secret, MASK)
    if not message.isprintable():
        message = "".join(char if char.isprintable() else ascii(char)[1:-1] for char in message)
    return message


def joined(url: str, path: str, strip_suffix: str = "") -> str:
    """`url` with `path` appended to its path (after removing `strip_suffix` from it), the
    query kept: `joined("http://h/v1?key=k", "/models")` is `http://h/v1/models?key=k`."""
    parts = urlsplit(url)
    base = parts.path.rstrip("/")
    if strip_suffix:
        base = base.removesuffix(strip_suffix)
    return urlunsplit((parts.scheme, parts.netloc, base + path, parts.query, ""))
