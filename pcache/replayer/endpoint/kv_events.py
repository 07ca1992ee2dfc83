"""`replay --endpoint URL --kv-events tcp://HOST:PORT`: the server's KV event stream, received.

A ZMQ SUB socket (all topics) set up before the measured pass: it binds the endpoint, where a
publisher connects (vLLM 0.32 connects to any endpoint but a wildcard, and so does pcache
serve), or, when the server holds the address already (it bound `tcp://*:PORT`), connects to
it. A thread receives
multipart `[topic, sequence, payload]` messages (vLLM's format, `pcache.serve.kv_event_wire`)
until the pass is over and the stream has been quiet for `QUIET_S` (at most `DRAIN_S`); what
arrives before the pass (a backlog of earlier runs' events) is left out (`settle`).
Sequence numbers that skip are counted as missed batches: the check is then incomplete.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pcache.errors import UsageError
from pcache.serve.kv_event_wire import msgpack_module, zmq_module

CONNECT_S = 10.0
"""At most this long for the connection to the publisher (a SUB socket misses what is sent
before its connection is up; on a busy machine that takes more than a second)."""
SUBSCRIBE_S = 0.25
"""Then this long for the subscription to reach the publisher."""
QUIET_S = 0.5
DRAIN_S = 10.0
POLL_MS = 50


@dataclass(slots=True)
class ReceivedEvents:
    """What arrived: the decoded events in order, and what the sequence numbers say."""

    events: list[dict[str, Any]] = field(default_factory=list)
    batches: int = 0
    missed_batches: int = 0
    undecodable: int = 0
    topics: set[str] = field(default_factory=set)
    last_sequence: int | None = None
    stale: int = 0
    """Events of the backlog the publisher held before the replay began (left out)."""


def check_endpoint(endpoint: str) -> str:
    scheme, _, rest = endpoint.partition("://")
    if scheme not in ("tcp", "ipc") or not rest:
        raise UsageError(
            f"--kv-events takes the server's ZMQ endpoint such as tcp://127.0.0.1:5557,"
            f" got {endpoint!r}"
        )
    zmq_module()
    msgpack_module()
    return endpoint


class KVEventSubscriber:
    """Receives a server's KV events on a thread between `start` and `stop`."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.received = ReceivedEvents()
        self._stop = threading.Event()
        self._last_message = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="pcache-kv-events", daemon=True)
        self._ready = threading.Event()
        self.connected = threading.Event()
        """Set once a ZMQ handshake with the publisher succeeded."""
        self._error: str | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(timeout=5)
        if self._error is not None:
            raise UsageError(f"--kv-events: {self._error}")
        self.connected.wait(timeout=CONNECT_S)
        time.sleep(SUBSCRIBE_S)

    def settle(self) -> None:
        """Wait until the stream is quiet (bounded), then leave out what came so far: a
        publisher that connects to this endpoint holds the events of earlier runs until a
        subscriber binds it, and sends them all at once."""
        self._quiet()
        with self._lock:
            received = self.received
            self.received = ReceivedEvents(
                stale=len(received.events), last_sequence=received.last_sequence
            )

    def stop(self) -> ReceivedEvents:
        """Wait until the stream is quiet (bounded), then stop receiving."""
        self._quiet()
        self._stop.set()
        self._thread.join(timeout=5)
        return self.received

    def _quiet(self) -> None:
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and time.monotonic() - self._last_message < QUIET_S:
            time.sleep(POLL_MS / 1000)

    def _run(self) -> None:
        zmq, msgpack = zmq_module(), msgpack_module()
        context = zmq.Context()
        socket = context.socket(zmq.SUB)
        socket.setsockopt(zmq.LINGER, 0)
        monitor = socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        try:
            try:
                socket.bind(self.endpoint)
            except zmq.ZMQError as error:
                if error.errno != zmq.EADDRINUSE:
                    raise
                socket.connect(self.endpoint)
        except zmq.ZMQError as error:
            self._error = f"cannot bind or connect to {self.endpoint}: {error}"
            self._ready.set()
            monitor.close()
            socket.close()
            context.term()
            return
        socket.setsockopt(zmq.SUBSCRIBE, b"")
        self._ready.set()
        try:
            while not self._stop.is_set():
                if not self.connected.is_set() and monitor.poll(0):
                    monitor.recv_multipart()
                    self.connected.set()
                if not socket.poll(POLL_MS):
                    continue
                self._last_message = time.monotonic()
                frames = socket.recv_multipart()
                with self._lock:
                    self._take(frames, msgpack)
        finally:
            socket.disable_monitor()
            monitor.close()
            socket.close()
            context.term()

    def _take(self, frames: list[bytes], msgpack: Any) -> None:
        received = self.received
        if len(frames) != 3 or len(frames[1]) != 8:
            received.undecodable += 1
            return
        topic, sequence_bytes, payload = frames
        sequence = int.from_bytes(sequence_bytes, "big", signed=True)
        if received.last_sequence is not None and sequence > received.last_sequence + 1:
            received.missed_batches += sequence - received.last_sequence - 1
        received.last_sequence = sequence
        received.topics.add(topic.decode(errors="replace"))
        try:
            batch = msgpack.unpackb(payload, raw=False, strict_map_key=False)
            events = batch[1]
            assert isinstance(events, list)
        except Exception:  # a payload that is not a KVEventBatch
            received.undecodable += 1
            return
        received.batches += 1
        for event in events:
            if isinstance(event, dict) and "type" in event:
                received.events.append(event)
            elif isinstance(event, list) and event and isinstance(event[0], str):
                received.events.append(_from_array(event))  # array_like events (SGLang)
            else:
                received.undecodable += 1


ARRAY_FIELDS = {
    "BlockStored": ("block_hashes", "parent_block_hash", "token_ids", "block_size"),
    "BlockRemoved": ("block_hashes",),
    "AllBlocksCleared": (),
}


def _from_array(event: list) -> dict[str, Any]:
    kind = event[0]
    names = ARRAY_FIELDS.get(kind, ())
    return {"type": kind, **dict(zip(names, event[1:], strict=False))}
