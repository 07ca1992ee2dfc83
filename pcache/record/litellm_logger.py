"""A LiteLLM callback that records each successful call as the transports do.

    import litellm
    from pcache.record.litellm_logger import LiteLLMRecorder
    litellm.callbacks = [LiteLLMRecorder("requests.jsonl")]

LiteLLM builds the provider's body itself, so the body written is LiteLLM's
`complete_input_dict` (with `extra_body` merged in, as the SDKs send it), serialized by pcache:
the same JSON, not necessarily the same bytes. The session is `session_id` if given, else the
call's `metadata.session_id` or `litellm_session_id`. Failed calls are not recorded.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime
from typing import Any

import orjson

from pcache.record.line import SessionKey, begin_line, finish_line, iso
from pcache.record.writer import LineWriter

try:
    from litellm.integrations.custom_logger import CustomLogger
except ImportError:  # pragma: no cover - litellm is optional
    raise ImportError("pcache.record.litellm_logger needs LiteLLM: pip install litellm") from None

logger = logging.getLogger("pcache.record")


def _usage(response: Any) -> dict[str, Any] | None:
    usage = getattr(response, "usage", None)
    if usage is None and isinstance(response, dict):
        usage = response.get("usage")
    if hasattr(usage, "model_dump"):
        usage = usage.model_dump(exclude_none=True)
    return usage if isinstance(usage, dict) else None


def _plain(value: Any) -> Any:
    """SDK objects (pydantic models) left in a body, as the JSON they serialize to."""
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    raise TypeError(f"not JSON: {type(value).__name__}")


def _session(kwargs: dict[str, Any]) -> str | None:
    params = kwargs.get("litellm_params") or {}
    metadata = params.get("metadata") or {}
    for value in (metadata.get("session_id"), params.get("litellm_session_id")):
        if value is not None:
            return str(value)
    return None


class LiteLLMRecorder(CustomLogger):
    """Appends one JSONL line per successful LiteLLM call (sync, async and streamed)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        session_id: SessionKey = None,
        redact: bool = False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.writer = LineWriter(path)
        self.session_id = session_id
        self.finish = finish_line
        """`finish_line`, or the redacted line's (`redact`: token counts and block hashes)."""
        if redact:
            from pcache.record.redacted import RedactedLines

            self.finish = RedactedLines().finish

    def record(self, kwargs: dict[str, Any], response: Any, start_time: Any) -> None:
        try:
            body = dict((kwargs.get("additional_args") or {}).get("complete_input_dict") or {})
            body.update(body.pop("extra_body", None) or {})
            params = kwargs.get("litellm_params") or {}
            url = params.get("api_base") or ""
            session = self.session_id if self.session_id is not None else _session(kwargs)
            stamp = iso(start_time) if isinstance(start_time, datetime) else None
            data = orjson.dumps(body, default=_plain)
            pending = begin_line("POST", url, data, session, stamp)
            if pending is not None:
                self.writer.write(self.finish(pending, 200, _usage(response)))
        except Exception:  # recording never fails a call
            logger.exception("pcache: cannot record a LiteLLM call")

    def log_success_event(self, kwargs, response_obj, start_time, end_time) -> None:
        self.record(kwargs, response_obj, start_time)

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time) -> None:
        self.record(kwargs, response_obj, start_time)
