"""`pcache serve --kv-events ENDPOINT`: the engine's block pool as vLLM's KV event stream.

Once per engine step the pool's queued events (`BlockPool.take_events`) go out as one
`KVEventBatch` on a ZMQ PUB socket bound to the endpoint (`pcache.serve.kv_event_wire` has
the format), numbered from 0 as vLLM numbers them. A fresh pool (after a failed step the
engine starts afresh) is announced by `AllBlocksCleared`. A bare port (`--kv-events 5557`) is
bound on loopback: BlockStored events carry the prompts' token ids, so they reach no one
beyond this machine unless asked for. Otherwise, as vLLM 0.32 does, the socket binds a
wildcard (`tcp://*:5557`, which the CLI warns about) or ipc/inproc endpoint and connects to
any other, where a subscriber (llm-d's indexer, `replay --kv-events`) has bound it. It is set
up when the server is built (a bad endpoint fails before the HTTP port opens), and from then
on only the engine's thread uses and closes it (ZMQ sockets are not thread-safe). There is no
replay socket: a subscriber that joins late misses what was sent before it.
"""

from __future__ import annotations

from typing import Any

from pcache.errors import UsageError
from pcache.serve.kv_event_wire import encode_batch, pool_events, sequence_bytes, zmq_module

# vLLM's KVEventsConfig.hwm: messages queued per subscriber before ZMQ drops them
SEND_HIGH_WATER_MARK = 100_000


LOOPBACK = "127.0.0.1"
MAX_ENDPOINT = 4096


def check_endpoint(endpoint: str) -> str:
    """A port to bind on loopback, or a ZMQ endpoint (tcp://HOST:PORT, ipc://PATH); else a
    usage error."""
    address, _ = resolve(endpoint)
    scheme, _, rest = address.partition("://")
    if (
        scheme not in ("tcp", "ipc", "inproc")
        or not rest
        or len(endpoint) > MAX_ENDPOINT
        or not endpoint.isprintable()
    ):
        shown = endpoint[:80] + ("..." if len(endpoint) > 80 else "")
        raise UsageError(
            "--kv-events takes a port (bound on loopback) or a ZMQ endpoint such as"
            f" tcp://127.0.0.1:5557, got {shown!r}"
        )
    if scheme == "tcp":
        port = rest.rpartition(":")[2]
        if port != "*" and not (port.isdigit() and 0 < int(port) <= 65535):
            raise UsageError(f"--kv-events: {port!r} is not a TCP port (1-65535)")
    zmq_module()
    return endpoint


def resolve(endpoint: str) -> tuple[str, bool]:
    """The ZMQ endpoint of `--kv-events` and whether the publisher binds it: a bare port is
    bound on loopback; else vLLM's rule: bind wildcard and ipc/inproc endpoints, connect to
    the rest (where a subscriber has bound)."""
    if endpoint.isdigit():
        return f"tcp://{LOOPBACK}:{endpoint}", True
    return endpoint, is_bind_endpoint(endpoint)


def is_bind_endpoint(endpoint: str) -> bool:
    """vLLM's rule: bind wildcard and ipc/inproc endpoints, connect to the rest."""
    return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))


def is_wildcard(endpoint: str) -> bool:
    """Whether the publisher binds every interface: its events reach whoever can connect."""
    address, bind = resolve(endpoint)
    host = address.partition("://")[2].rpartition(":")[0].strip("[]")
    return bind and address.startswith("tcp://") and host in ("*", "0.0.0.0", "::", "")


class KVEventPublisher:
    """A PUB socket that sends the block pool's events, one batch per call to `publish`."""

    def __init__(self, endpoint: str, topic: str = "", data_parallel_rank: int | None = None):
        self.endpoint, self.bind = resolve(endpoint)
        self.topic = topic.encode()
        self.data_parallel_rank = data_parallel_rank
        self.sequence = 0
        self._socket: Any = None
        self._context: Any = None
        self._pool: Any = None

    def open(self) -> None:
        zmq = zmq_module()
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.PUB)
        self._socket.setsockopt(zmq.SNDHWM, SEND_HIGH_WATER_MARK)
        self._socket.setsockopt(zmq.LINGER, 1000)
        bind = self.bind
        try:
            (self._socket.bind if bind else self._socket.connect)(self.endpoint)
        except zmq.ZMQError as error:
            self.close()
            verb = "bind" if bind else "connect to"
            raise UsageError(f"--kv-events: cannot {verb} {self.endpoint}: {error}") from None

    def watch(self, pool: Any) -> None:
        """Turn events on in the engine's current pool (call before each step); a pool that
        replaced the one watched so far starts with `AllBlocksCleared`."""
        if pool is self._pool:
            return
        if self._pool is not None:
            self._send([{"type": "AllBlocksCleared"}])
        pool.enable_kv_cache_events = True
        self._pool = pool

    def publish(self, block_size: int) -> None:
        """Send what the watched pool queued since the last call, if anything."""
        if self._pool is None:
            return
        events = pool_events(self._pool.take_events(), block_size)
        if events:
            self._send(events)

    def _send(self, events: list) -> None:
        payload = encode_batch(events, data_parallel_rank=self.data_parallel_rank)
        self._socket.send_multipart((self.topic, sequence_bytes(self.sequence), payload))
        self.sequence += 1

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._context is not None:
            self._context.term()
            self._context = None
