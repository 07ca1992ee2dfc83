"""Hugging Face models: `tokenizer.json` through `tokenizers`, the chat template through Jinja.

`--tokenizer DIR_OR_HUB_ID` lands here. The runtime path never imports transformers or torch and
never runs model code (`trust_remote_code` does not exist here): the template is rendered in
pcache's sandboxed copy of transformers' environment (`chat_jinja`), with the same inputs
`apply_chat_template` gives it, and the text is encoded with `add_special_tokens=False`, so the
ids equal `apply_chat_template(..., tokenize=True)`. A text prompt gets the special tokens the
tokenizer adds (`prompt_tokens`, `pcache.prompt.tokenizers.codec.encode_text_prompt`).
"""

from __future__ import annotations

import hashlib
import json
from functools import partial
from pathlib import Path
from typing import Any

from pcache.errors import InputError, RequestTemplateError, TokenizerError
from pcache.files import read_input, read_text
from pcache.prompt.renderers.chat_jinja import (
    TemplateLimitExceeded,
    TemplateRaised,
    make_environment,
    pinned_date,
    template_messages,
)
from pcache.prompt.renderers.interface import Renderer, RenderOptions, TemplateRenderer
from pcache.prompt.renderers.provenance import DeferredSpans
from pcache.prompt.renderers.rendered import Span
from pcache.prompt.shapes.request import Request, request_from_document
from pcache.prompt.tokenizers.codec import (
    PromptTokens,
    load_tokenizer,
    one_line,
    prompt_tokens,
    tokenizer_from_bytes,
)
from pcache.prompt.tokenizers.hf_files import ModelFiles, locate_model_files
from pcache.prompt.tokenizers.hf_pieces import HFPieces, TiktokenCodec, monotonic_starts
from pcache.prompt.tokenizers.tiktoken_bpe import FastBPE, fast_bpe, fast_path_allowed

SPECIAL_TOKEN_NAMES = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)
"""The named special tokens transformers passes to a template as variables."""

CLOCK_PROBE_DATES = ("2001-02-03", "2019-11-28")


class HFTemplateRenderer:
    """A Hugging Face tokenizer plus its chat template(s), compiled once."""

    def __init__(
        self,
        label: str,
        tokenizer: Any,
        templates: dict[str, str],
        special_tokens: dict[str, str],
        tokenizer_digest: str,
        fast: FastBPE | None = None,
        slow_reason: str = "",
    ):
        """`tokenizer`: the `tokenizers` tokenizer, or (with `fast`, which encodes without
        it) a function that loads it when it is first needed. `slow_reason`: why there is no
        `fast`, for `encoder_path`."""
        assert "default" in templates or len(templates) == 1 or "tool_use" in templates
        self.label = label
        self._tokenizer = None if fast is not None else tokenizer
        self._load_tokenizer = tokenizer if fast is not None else None
        self.templates = templates
        self.special_tokens = special_tokens
        self._prompt_tokens: PromptTokens | None = None
        self.name = f"hf:{label}@{tokenizer_digest[:12]}"
        self.template_digest = _digest_templates(templates)
        self.fast = fast
        if fast is not None:
            codec = TiktokenCodec(fast.encoding, fast.converted.nfc, lambda: self.tokenizer)
            self._pieces = HFPieces.of_added(codec, fast.converted.added)
            assert self._pieces is not None, "a convertible tokenizer cuts into pieces"
            self.encoder_path = "tiktoken (byte-level BPE converted from tokenizer.json)"
        else:
            self._pieces = HFPieces.of(self.tokenizer)
            self.encoder_path = f"tokenizers ({slow_reason or 'not a convertible BPE'})"
        environment = make_environment()
        self._compiled: dict[str, Any] = {}
        for key, source in templates.items():
            try:
                self._compiled[key] = environment.from_string(source)
            except Exception as error:  # jinja2.TemplateSyntaxError and friends
                where = f" line {error.lineno}" if getattr(error, "lineno", None) else ""
                raise TokenizerError(
                    f"{label}: chat template {key!r} does not parse{where}: {one_line(error)}"
                ) from None

    def template_key(self, has_tools: bool) -> str:
        """Which template applies, as transformers picks it (`tool_use` when tools are given)."""
        if len(self.templates) == 1:
            return next(iter(self.templates))
        if has_tools and "tool_use" in self.templates:
            return "tool_use"
        return "default" if "default" in self.templates else "tool_use"

    def render_text(self, request: Request, options: RenderOptions) -> tuple[str, list[Span]]:
        text, spans = self.render_text_deferred(request, options)
        return text, spans.spans()

    def render_text_deferred(
        self, request: Request, options: RenderOptions
    ) -> tuple[str, DeferredSpans]:
        """The rendered text, and its spans to be located when asked for."""
        if not request.messages:
            raise InputError(request.label, "no messages to apply the chat template to")
        tools = request.tools or None
        template = self._compiled[self.template_key(tools is not None)]
        variables = {**self.special_tokens, **options.template_kwargs}

        def render_messages(messages: list[dict[str, Any]]) -> str:
            with pinned_date(options.date):
                return template.render(
                    messages=template_messages(messages),
                    tools=tools,
                    documents=None,
                    add_generation_prompt=options.add_generation_prompt,
                    **variables,
                )

        try:
            text = render_messages(request.messages)
        except TemplateRaised as error:
            raise RequestTemplateError(
                request.source,
                f"the {self.label} chat template refused the request: {one_line(error)}",
                request.line,
            ) from None
        except TemplateLimitExceeded as error:
            raise RequestTemplateError(
                request.source, f"{self.label}: {error}", request.line
            ) from None
        except Exception as error:  # errors inside an untrusted template are input problems
            raise RequestTemplateError(
                request.source,
                f"the {self.label} chat template failed: {type(error).__name__}: {one_line(error)}",
                request.line,
            ) from None
        return text, DeferredSpans(text, request, render_messages)

    @property
    def tokenizer(self) -> Any:
        """The `tokenizers` tokenizer (loaded on first use when tiktoken encodes)."""
        if self._tokenizer is None:
            assert self._load_tokenizer is not None
            self._tokenizer = self._load_tokenizer()
        return self._tokenizer

    @property
    def prompt_tokens(self) -> PromptTokens:
        """What the tokenizer's post-processor puts around a text prompt (found on first use)."""
        if self._prompt_tokens is None:
            self._prompt_tokens = prompt_tokens(self.tokenizer)
        return self._prompt_tokens

    def piece_encoder(self) -> HFPieces | None:
        """Encodes the pieces between added tokens apart (None if this tokenizer cannot)."""
        return self._pieces

    def encode(self, text: str) -> list[int]:
        if self.fast is not None:
            assert self._pieces is not None
            return self._pieces.encode(text)
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def encode_with_starts(self, text: str) -> tuple[list[int], list[int]]:
        if self.fast is not None:
            assert self._pieces is not None
            return self._pieces.encode_with_starts(text)
        encoding = self.tokenizer.encode(text, add_special_tokens=False)
        return encoding.ids, monotonic_starts(encoding.offsets)

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=False)


def load_hf_renderer(name_or_path: str) -> HFTemplateRenderer:
    """The renderer of a local model directory or a hub id (from the local cache first)."""
    files = locate_model_files(name_or_path)
    data = read_input(files.tokenizer, what="tokenizer.json")  # its errors come first
    config = _read_json(files.config) if files.config else {}
    templates = _templates(files, config)
    special_tokens = _special_tokens(files, config)
    digest = hashlib.sha256(data).hexdigest()
    fast = fast_bpe(data, digest, files.label) if fast_path_allowed() else None
    if isinstance(fast, FastBPE):
        tokenizer: Any = partial(_tokenizer_of, files.tokenizer, digest)
        return HFTemplateRenderer(files.label, tokenizer, templates, special_tokens, digest, fast)
    tokenizer = tokenizer_from_bytes(data, files.tokenizer)
    reason = fast or "PCACHE_TOKENIZERS=1 is set"
    return HFTemplateRenderer(
        files.label, tokenizer, templates, special_tokens, digest, slow_reason=reason
    )


def _tokenizer_of(path: Path, digest: str) -> Any:
    """The `tokenizers` tokenizer of a file read before (whose sha256 was `digest`)."""
    tokenizer, data = load_tokenizer(path)
    if hashlib.sha256(data).hexdigest() != digest:
        raise TokenizerError(f"{path}: changed while pcache was reading it")
    return tokenizer


def template_calls_clock(renderer: Renderer, request: Request | None = None) -> bool:
    """Whether the rendered tokens change with the date: renders `request` (or a small probe)
    at two pinned dates. A Hugging Face template that never names `strftime_now` is skipped."""
    if isinstance(renderer, TemplateRenderer) and not any(
        "strftime_now" in t for t in renderer.templates.values()
    ):
        return False
    probe = request or request_from_document(
        {"messages": [{"role": "system", "content": "Hi."}, {"role": "user", "content": "Hi."}]},
        "<clock probe>",
    )
    tokens = []
    for date in CLOCK_PROBE_DATES:
        text, _ = renderer.render_text(probe, RenderOptions(date=date))
        tokens.append(renderer.encode(text))
    return tokens[0] != tokens[1]


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(read_text(path, what="JSON file"))
    except json.JSONDecodeError as error:
        raise TokenizerError(f"{path}:{error.lineno}:{error.colno}: {error.msg}") from None
    if not isinstance(value, dict):
        raise TokenizerError(f"{path}: expected a JSON object")
    return value


def _templates(files: ModelFiles, config: dict[str, Any]) -> dict[str, str]:
    """The chat templates, as transformers reads them: the .jinja file wins over the config."""
    if files.template is not None:
        return {"default": read_text(files.template, what="chat template")}
    value = config.get("chat_template")
    if isinstance(value, str):
        return {"default": value}
    if isinstance(value, list):
        named = {
            item["name"]: item["template"]
            for item in value
            if isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("template"), str)
        }
        if named and ("default" in named or "tool_use" in named or len(named) == 1):
            return named
        if named:
            raise TokenizerError(
                f"{files.label}: several chat templates ({', '.join(sorted(named))}) and no default"
            )
    raise TokenizerError(
        f"{files.label}: no chat template (neither chat_template.jinja nor a `chat_template`"
        " in tokenizer_config.json)"
    )


def _special_tokens(files: ModelFiles, config: dict[str, Any]) -> dict[str, str]:
    tokens: dict[str, str] = {}
    sources = [_read_json(files.special_tokens) if files.special_tokens else {}, config]
    for source in sources:
        for name in SPECIAL_TOKEN_NAMES:
            value = source.get(name)
            if isinstance(value, dict):
                value = value.get("content")
            if isinstance(value, str):
                tokens[name] = value
    return tokens


def _digest_templates(templates: dict[str, str]) -> str:
    if len(templates) == 1:
        return hashlib.sha256(next(iter(templates.values())).encode("utf-8")).hexdigest()
    canonical = json.dumps(templates, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
