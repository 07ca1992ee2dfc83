"""`Recorder`: the requests SDK clients send during a test, answered by canned responses.

    recorder = Recorder(tmp_path / "requests.jsonl")
    recorder.respond(chat_completion("Hello!"))
    client = OpenAI(api_key="test", http_client=recorder.client())
    ...
    assert_prefix_stable(recorder.requests)

Nothing leaves the process: requests go to the canned responses, in order, unless a transport
of your own is passed to `transport()`.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Any

from pcache.record.canned import Canned, CannedResponses, CannedTransport
from pcache.record.line import SessionKey
from pcache.record.transport import AsyncTransport, Transport


def default_http() -> ModuleType:
    """httpx2 where it is installed (what current SDKs require), else httpx."""
    try:
        return importlib.import_module("httpx2")
    except ImportError:
        return importlib.import_module("httpx")


class Recorder:
    """Records to JSONL `path`; `requests` and `records` read the file back."""

    def __init__(
        self, path: str | os.PathLike[str], *, session_id: SessionKey = None, redact: bool = False
    ):
        self.path = Path(path)
        self.session_id = session_id
        self.redact = redact
        """Lines without the requests' text: token counts and block hashes
        (`pcache.record.redacted`)."""
        self.canned = CannedResponses()
        self._transports: list[Any] = []

    def respond(self, *responses: Canned) -> Recorder:
        """Queue responses for the next requests (JSON values, SSE bytes, responses, functions)."""
        self.canned.add(*responses)
        return self

    def transport(self, inner: Any = None) -> Transport:
        transport = Transport(
            self.path,
            inner or CannedTransport(self.canned),
            session_id=self.session_id,
            redact=self.redact,
        )
        self._transports.append(transport)
        return transport

    def async_transport(self, inner: Any = None) -> AsyncTransport:
        transport = AsyncTransport(
            self.path,
            inner or CannedTransport(self.canned),
            session_id=self.session_id,
            redact=self.redact,
        )
        self._transports.append(transport)
        return transport

    def client(self, http: ModuleType | None = None, **options: Any) -> Any:
        """An `http.Client` (default: `default_http()`) over `transport()`, for `http_client=`."""
        return (http or default_http()).Client(transport=self.transport(), **options)

    def async_client(self, http: ModuleType | None = None, **options: Any) -> Any:
        return (http or default_http()).AsyncClient(transport=self.async_transport(), **options)

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every line written so far (timestamp, session_id, status, usage, body...), read by
        the JSONL reader `pcache lint` and `pcache replay` use (lines end at "\\n" only: a
        body keeps any other JSON whitespace, "\\r" included, as it was sent)."""
        from pcache.prompt.reading.loading import iter_json_lines

        if not self.path.exists() or self.path.stat().st_size == 0:
            return []
        return [value for _, value in iter_json_lines(self.path)]

    @property
    def requests(self) -> list[dict[str, Any]]:
        """The request bodies sent so far, in order (none when redacted)."""
        return [record["body"] for record in self.records if "body" in record]

    def close(self) -> None:
        for transport in self._transports:
            if isinstance(transport, Transport):
                transport.close()
            else:
                transport.recorder.writer.close()
        self._transports.clear()
