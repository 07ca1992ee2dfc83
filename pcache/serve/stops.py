"""Stop strings on the streamed text: the answer ends before the first one (or after it, with
`include_stop_str_in_output`), as vLLM matches them on the detokenized text.

While no stop string has been found, the last `longest - 1` characters are held back: they
may be the start of a stop string that the next token completes.
"""

from __future__ import annotations


class StopMatcher:
    def __init__(self, stops: tuple[str, ...], include_stop: bool = False) -> None:
        assert all(stops), "stop strings are not empty"
        self.stops = stops
        self.include_stop = include_stop
        self.hold = max((len(stop) for stop in stops), default=1) - 1
        self.text = ""
        self.emitted = 0
        self.matched: str | None = None

    def push(self, delta: str) -> str:
        """The text that can be sent now; `matched` is set once a stop string is found."""
        assert self.matched is None, "no text after a stop string"
        if not self.stops:
            return delta
        previous = len(self.text)
        self.text += delta
        found = -1
        for stop in self.stops:  # an occurrence not seen before ends inside `delta`
            index = self.text.find(stop, max(0, previous - len(stop) + 1))
            if index >= 0 and (found < 0 or index < found):
                found, self.matched = index, stop
        if found >= 0:
            assert self.matched is not None
            end = found + len(self.matched) if self.include_stop else found
            return self._emit_to(max(end, self.emitted))
        return self._emit_to(max(self.emitted, len(self.text) - self.hold))

    def flush(self) -> str:
        """The held-back text, once the answer ended without a stop string."""
        return "" if self.matched is not None else self._emit_to(len(self.text))

    def _emit_to(self, end: int) -> str:
        piece = self.text[self.emitted : end]
        self.emitted = end
        return piece
