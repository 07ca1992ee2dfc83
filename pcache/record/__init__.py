"""Record the requests an application sends through the OpenAI, Anthropic or LiteLLM SDKs.

`Transport` and `AsyncTransport` wrap an httpx transport and append one JSONL line per request
(`timestamp`, `session_id`, `method`, `url`, `status`, `usage`, `output_length`, `body`): the
Batch-style wrapper that `pcache lint` and `pcache replay` read as they are. Bodies are kept
byte for byte, responses reach the application untouched, headers are never written, and a
failure to write never fails the request.
"""

from pcache.record.assertions import assert_cacheable, assert_prefix_stable
from pcache.record.recorder import Recorder
from pcache.record.transport import AsyncTransport, Transport

__all__ = ["AsyncTransport", "Recorder", "Transport", "assert_cacheable", "assert_prefix_stable"]
