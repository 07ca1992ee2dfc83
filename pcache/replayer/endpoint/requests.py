"""What `replay --endpoint` sends: one streamed request body per trace record.

`completions` sends the record's token ids as the `prompt` of `/v1/completions` (vLLM,
SGLang and pcache serve accept token ids), so the server sees exactly the tokens the
simulator hashes; hash-id records (Mooncake, Bailian) get seeded tokens per block id, below
`vocab_size`. `chat` and `anthropic` send a request trace's own messages (its body, less
pcache's sidecar keys), with the model, streaming and the output length set; to the chat
API, a request of another shape (Anthropic Messages, OpenAI Responses, Gemini, Bedrock
Converse, OTel or OpenInference spans) sends its messages as pcache reads them (system prompt
first, a Responses chain rebuilt, tool-call arguments as JSON text) and its tools as chat
function tools, and none of its own wire keys (`input`, `contents`, `toolConfig`, ...) but a
numeric `temperature`.

`--api` not given: a request trace of messages is sent to the chat API (the server renders
the messages with its own template), a trace of token ids, text prompts or hash ids to
completions.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pcache.errors import InputError, UsageError
from pcache.replayer.endpoint.options import EndpointOptions
from pcache.traces.record import Trace, TraceRecord

TEMPLATE_KEYS = ("tools", "chat_template_kwargs", "reasoning_effort")
"""Request fields a chat template reads, sent with the messages (to the chat API and to
/tokenize)."""
DEFAULT_OUTPUT_TOKENS = 16
DEFAULT_VOCAB_SIZE = 512


def materialize(trace: Trace, options: EndpointOptions) -> Trace:
    """The trace as token records (`pcache.replayer.tokens`, as the engine driver runs it):
    hash ids become seeded tokens per block id below `vocab_size` (512 unless given); token
    ids are sent as they are, or mapped into `vocab_size` when it is given and they exceed
    it; cut to `limit` requests and `max_prompt_tokens` tokens a prompt."""
    from pcache.replayer.tokens import Slicing, engine_trace

    vocab = options.vocab_size
    if vocab is None:
        vocab = DEFAULT_VOCAB_SIZE if trace.block_size is not None else 1 << 62
    slicing = Slicing(options.limit, options.max_prompt_tokens)
    tokens, _ = engine_trace(trace, vocab, 1 << 62, slicing, options.seed)
    outputs = {record.index: record.output_length for record in trace.records}
    records = [replace(r, output_length=outputs[r.index]) for r in tokens.records]
    return replace(tokens, records=records)  # output lengths: the trace's (0: the default)


def trace_requests(trace: Trace) -> dict[int | None, Any]:
    """The parsed request of each record of a request trace, by line: those its reader kept
    (`read_trace(..., keep_requests=True)`). Empty for other traces."""
    if trace.format != "requests" or trace.requests is None:
        return {}
    return {record.line: trace.requests[record.line] for record in trace.records}


def is_chat_body(request: Any) -> bool:
    """Whether the request is a Chat Completions body (sent to the chat API as it is)."""
    return request.kind == "openai" and isinstance(request.raw.get("messages"), list)


def chat_messages(request: Any) -> list[Any]:
    """The messages a chat request sends: a Chat Completions body's own, else (Anthropic,
    Responses, ...) the request's messages as pcache reads them (system prompt first), with
    tool-call arguments as the JSON text the chat API takes."""
    if is_chat_body(request):
        return request.raw["messages"]
    return [_chat_message(message) for message in request.messages]


def chat_fields(request: Any) -> dict[str, Any]:
    """What the chat API and its template read of a request: its messages (`chat_messages`)
    and tools. A Chat Completions body's own `tools` and template fields
    (`endpoint_tokenize.TEMPLATE_KEYS`); another shape's tools as chat function tools."""
    fields: dict[str, Any] = {"messages": chat_messages(request)}
    if is_chat_body(request):
        raw = request.raw
        fields.update((key, raw[key]) for key in TEMPLATE_KEYS if raw.get(key) is not None)
    elif request.tools:
        fields["tools"] = request.tools
    return fields


def _chat_message(message: dict[str, Any]) -> dict[str, Any]:
    import orjson

    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return message
    sent = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        arguments = function.get("arguments") if isinstance(function, dict) else None
        if isinstance(function, dict) and not isinstance(arguments, str):
            text = orjson.dumps(arguments if arguments is not None else {}).decode()
            call = {**call, "function": {**function, "arguments": text}}
        sent.append(call)
    return {**message, "tool_calls": sent}


def default_api(trace: Trace, requests: dict[int | None, Any]) -> str:
    """chat for a trace whose every request has messages (and no token ids), else completions."""
    if trace.format != "requests" or not requests:
        return "completions"
    for record in trace.records:
        request = requests.get(record.line)
        if request is None or request.token_ids is not None or not request.messages:
            return "completions"
    return "chat"


def request_bodies(
    trace: Trace,
    options: EndpointOptions,
    requests: dict[int | None, Any],
    text_prompts: bool = False,
) -> list[dict[str, Any]]:
    """One streamed request body per record (`requests`: `trace_requests`). `text_prompts`:
    a text prompt goes out as its text, not as its token ids (a router that takes only text,
    as SGLang's does, in front of replicas that tokenize it as their /tokenize did)."""
    bodies = []
    if options.api != "completions" and not requests and trace.format == "requests":
        raise UsageError("--api chat and anthropic send the trace's own bodies: give a file")
    for record in trace.records:
        output = options.max_output_tokens or record.output_length or DEFAULT_OUTPUT_TOKENS
        if options.max_output_tokens and record.output_length:
            output = min(output, record.output_length)
        if options.api == "completions":
            body: dict[str, Any] = {
                "model": options.model,
                "prompt": record.token_ids,
                "max_tokens": output,
                "temperature": 0,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            request = requests.get(record.line) if text_prompts else None
            if request is not None and isinstance(request.prompt, str) and not request.token_ids:
                body["prompt"] = request.prompt
            if record.cache_salt:
                body["cache_salt"] = record.cache_salt
        else:
            body = _message_body(trace, record, requests, options, output)
        if options.ignore_eos:
            body["ignore_eos"] = True
        bodies.append(body)
    return bodies


def _message_body(
    trace: Trace, record: TraceRecord, requests: dict, options: EndpointOptions, output: int
) -> dict[str, Any]:
    from pcache.prompt.shapes.request import SIDECAR_KEYS

    if trace.format != "requests" or record.line not in requests:
        raise UsageError(
            f"--api {options.api} replays request traces (messages), not {trace.format}"
        )
    request = requests[record.line]
    if not request.messages:
        raise InputError(trace.source, f"--api {options.api} needs `messages`", record.line)
    body = {key: value for key, value in request.raw.items() if key not in SIDECAR_KEYS}
    body["model"] = options.model
    body["stream"] = True
    if options.api == "anthropic":
        body["max_tokens"] = output
    else:
        if not is_chat_body(request):  # another shape: its messages and tools as pcache reads them
            temperature = body.get("temperature")
            body = {"model": options.model, "stream": True, **chat_fields(request)}
            if isinstance(temperature, int | float) and not isinstance(temperature, bool):
                body["temperature"] = temperature
        body.pop("max_tokens", None)
        body["max_completion_tokens"] = output
        body["stream_options"] = {"include_usage": True}
    return body
