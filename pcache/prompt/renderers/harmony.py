"""The embedded default renderer: the gpt-oss chat format (harmony) over tiktoken's o200k_harmony.

A Chat Completions request becomes harmony messages the way a serving engine builds them:

- a system message: model identity, knowledge cutoff, `Current date:` (pinned by `--date`, since
  a moving date breaks every prefix), `Reasoning:` (the request's `reasoning_effort`, default
  medium), the valid channels, and the tools-calling note when function tools exist;
- a developer message: `# Instructions` (the first message, when it is a system or developer
  message) and `# Tools` (every function tool as a TypeScript-like signature);
- user turns; assistant turns on the `final` channel; assistant tool calls on the `commentary`
  channel to `functions.NAME` with `<|constrain|>json`, the arguments as the client sent them;
  tool results from `functions.NAME` to the assistant; later system or developer messages as
  developer messages in place;
- reasoning (`reasoning_content`) on the `analysis` channel, kept only after the last assistant
  answer on the `final` channel, as the format asks: older chains of thought are dropped;
- the generation prompt `<|start|>assistant`.

Text from the request is ordinary text even when it spells a special token such as `<|end|>`;
only the markers the format writes are special tokens.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from itertools import accumulate
from operator import itemgetter, methodcaller

from pcache.prompt.renderers.harmony_messages import SPECIAL_MARKERS, conversation_pieces
from pcache.prompt.renderers.harmony_schema import Piece
from pcache.prompt.renderers.interface import RenderOptions
from pcache.prompt.renderers.plain import TiktokenEncoder
from pcache.prompt.renderers.rendered import Span
from pcache.prompt.shapes.request import Request

LAYOUT_VERSION = "pcache-harmony-gpt-oss-v1"
"""Bump when the rendered layout changes: it is bound into pcache's hash namespace."""
_REMEMBERED_LAYOUTS = 512
"""Texts whose markers are kept: a render stage renders a chunk of requests before it encodes them
(`pcache.pipeline.RENDER_CHUNK`)."""
_without_continuation_bytes = methodcaller("translate", None, bytes(range(0x80, 0xC0)))
_IS_CONTINUATION = bytes(1 if 0x80 <= byte < 0xC0 else 0 for byte in range(256))


class HarmonyRenderer(TiktokenEncoder):
    """gpt-oss / harmony chat format, rendered by pcache's own code, with o200k_harmony."""

    def __init__(self) -> None:
        super().__init__("o200k_harmony")
        self.name = "gpt-oss"
        self.template_digest = hashlib.sha256(LAYOUT_VERSION.encode()).hexdigest()
        self._special_ids = {
            marker: self.encoding.encode_single_token(marker)
            for marker in (*SPECIAL_MARKERS, "<|return|>")
        }
        self._layouts: OrderedDict[str, tuple[list[tuple[int, int]], list[str]]] = OrderedDict()
        """Each text rendered recently: where its special tokens are, and its cut there."""

    # -- rendering ----------------------------------------------------------------------------

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        return self._assemble(conversation_pieces(request, options), request)

    def _assemble(self, pieces: list[Piece], request: Request) -> tuple[str, list[Span]]:
        """`assemble(pieces, request)`, noting where the format's own special tokens are and
        the text between them, for `encode` of this text (one pass over the pieces)."""
        special_ids = self._special_ids
        source_path = request.source_path
        texts: list[str] = []
        spans: list[Span] = []
        markers: list[tuple[int, int]] = []
        parts: list[str] = []
        ordinary: list[str] = []
        offset = 0
        for text, path in pieces:
            if not text:
                continue
            end = offset + len(text)
            if path is None:
                if text in special_ids:
                    markers.append((offset, end))
                    parts += ("".join(ordinary), text)
                    ordinary = []
                    texts.append(text)
                    offset = end
                    continue
                assert "<|" not in text, f"marker inside {text!r}"
            elif spans and spans[-1].normalized == path and spans[-1].end == offset:
                last = spans[-1]
                spans[-1] = Span(last.start, end, last.path, path)
            else:
                spans.append(Span(offset, end, source_path(path), path))
            ordinary.append(text)
            texts.append(text)
            offset = end
        parts.append("".join(ordinary))
        rendered = "".join(texts)
        layouts = self._layouts
        layouts[rendered] = (markers, parts)
        layouts.move_to_end(rendered)
        while len(layouts) > _REMEMBERED_LAYOUTS:
            layouts.popitem(last=False)
        return rendered, spans

    # -- tokenizing ---------------------------------------------------------------------------

    def special_spans(self, text: str) -> list[tuple[int, int]] | None:
        """(start, end) of each special token this renderer wrote into `text`, a text it rendered
        recently; None for any other text (it may hold special tokens only as ordinary text)."""
        layout = self._layouts.get(text)
        return None if layout is None else layout[0]

    def special_parts(self, text: str) -> list[str] | None:
        """`text` cut at the special tokens `special_spans` gives, as `re.split` with one
        group cuts (ordinary text at even indices, each special token at the odd ones)."""
        layout = self._layouts.get(text)
        return None if layout is None else list(layout[1])

    def encode(self, text: str) -> list[int]:
        """Special tokens are the format's markers; request text is encoded as ordinary text.

        Text this renderer produced is split at the markers it wrote; any other text is
        encoded with every special token recognized.
        """
        markers = self.special_spans(text)
        if markers is None:
            return self.encoding.encode(text, allowed_special="all")
        token_ids: list[int] = []
        position = 0
        for start, end in markers:
            if start > position:
                token_ids += self.encoding.encode_ordinary(text[position:start])
            token_ids.append(self._special_ids[text[start:end]])
            position = end
        if position < len(text):
            token_ids += self.encoding.encode_ordinary(text[position:])
        return token_ids

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        token_ids = self.encode(text)
        token_bytes = self.encoding.decode_tokens_bytes(token_ids)
        assert b"".join(token_bytes) == text.encode(), "tokens do not spell the text"
        return token_ids, token_starts(token_bytes, text.isascii())


def token_starts(token_bytes: list[bytes], is_ascii: bool) -> list[int]:
    """Each token's first character; a token that begins inside a character points at it."""
    if not token_bytes:
        return []
    if is_ascii:
        return [0, *accumulate(map(len, token_bytes[:-1]))]
    characters = map(len, map(_without_continuation_bytes, token_bytes[:-1]))
    starts = [0, *accumulate(characters)]
    first_bytes = bytes(map(itemgetter(0), token_bytes)).translate(_IS_CONTINUATION)
    index = first_bytes.find(1)
    while index >= 0:
        starts[index] = max(0, starts[index] - 1)
        index = first_bytes.find(1, index + 1)
    return starts
