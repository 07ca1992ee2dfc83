"""Record Bedrock Converse calls made through boto3, by botocore's event hooks.

    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    BedrockRecorder("requests.jsonl").attach(client)
    client.converse(modelId=..., system=[...], messages=[...], toolConfig={...})

Each `converse` call becomes one line of the recorder's format: the call's parameters as the
Converse JSON body (`bytes` as base64, as the REST API sends them), the URL
`{endpoint}/model/{modelId}/converse`, and the response's `usage` (`cacheReadInputTokens` is
the observed cached tokens). `converse_stream` calls are recorded without usage (it arrives in
the stream's last event, which the application reads). No credential or header is written; a
failure to record never fails the call.
"""

from __future__ import annotations

import base64
import logging
import os
from typing import Any
from urllib.parse import quote

import orjson

from pcache.record.line import SessionKey, begin_line, finish_line
from pcache.record.writer import LineWriter

logger = logging.getLogger("pcache.record")
OPERATIONS = ("Converse", "ConverseStream")
_PENDING = "pcache_pending_line"


def _json_ready(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(item) for item in value]
    return value


class BedrockRecorder:
    """Appends one line per Converse call of the clients it is attached to."""

    def __init__(self, path: str | os.PathLike[str], *, session_id: SessionKey = None):
        self.writer = LineWriter(path)
        self.session_id = session_id

    def attach(self, client: Any) -> Any:
        """Hook `client` (a boto3 `bedrock-runtime` client); returns it."""
        events = client.meta.events
        for operation in OPERATIONS:
            events.register(f"provide-client-params.bedrock-runtime.{operation}", self._begin)
            events.register(f"after-call.bedrock-runtime.{operation}", self._finish)
        self._endpoint = client.meta.endpoint_url
        return client

    def _begin(self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any):
        try:
            body = orjson.dumps(_json_ready(params))
            model_id = quote(str(params.get("modelId", "")), safe="")
            suffix = "converse-stream" if model.name == "ConverseStream" else "converse"
            url = f"{self._endpoint}/model/{model_id}/{suffix}"
            context[_PENDING] = begin_line("POST", url, body, self.session_id)
        except Exception:  # recording never fails a call
            logger.exception("pcache: cannot record a Bedrock call")

    def _finish(self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_):
        pending = context.pop(_PENDING, None)
        if pending is None:
            return
        try:
            usage = parsed.get("usage") if isinstance(parsed, dict) else None
            status = getattr(http_response, "status_code", None)
            if status is None and isinstance(parsed, dict):
                status = parsed.get("ResponseMetadata", {}).get("HTTPStatusCode")
            self.writer.write(finish_line(pending, status, usage))
        except Exception:
            logger.exception("pcache: cannot record a Bedrock call")

    def close(self) -> None:
        self.writer.close()
