"""OpenAI's generation routes, `POST /v1/chat/completions` and `POST /v1/completions`: a
request's prompt turned into token ids, submitted to the engine, and answered as a stream of
events or as one whole body."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from pcache.errors import EngineError
from pcache.serve.answer import Answer
from pcache.serve.api_error import ApiError, bad_request, internal_error
from pcache.serve.disconnect import EventStream, unless_disconnected
from pcache.serve.engine_loop import Submission
from pcache.serve.error_response import error_response
from pcache.serve.logprobs import LogprobsWriter
from pcache.serve.protocol import GenerationRequest, parse_request, unknown_fields
from pcache.serve.responses import ResponseBuilder, sse

if TYPE_CHECKING:
    from pcache.serve.app import Server

logger = logging.getLogger("pcache.serve")

_warned_fields: set[str] = set()


def _warn_unknown(body: dict, chat: bool) -> None:
    """vLLM's behaviour: unknown fields are ignored, with a warning (once per name)."""
    for key in unknown_fields(body, chat):
        if key not in _warned_fields and len(_warned_fields) < 256:
            _warned_fields.add(key)
            logger.warning("pcache serve: ignoring the unknown request field %r", key[:80])


class GenerationRoutes:
    """The two generation routes of one server, over its engine host and its text codec."""

    def __init__(
        self,
        server: Server,
        body_of: Callable[[Request], Awaitable[Any]],
        check_model: Callable[[str | None], None],
    ) -> None:
        self.server = server
        self.engine_loop = server.engine_loop
        self.body_of = body_of
        self.check_model = check_model

    def routes(self) -> list[Route]:
        return [
            Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            Route("/v1/completions", self.completions, methods=["POST"]),
        ]

    async def chat_completions(self, request: Request):
        return await self.generate(request, chat=True)

    async def completions(self, request: Request):
        return await self.generate(request, chat=False)

    def prompt_ids(self, params: GenerationRequest) -> list[int]:
        """The prompt's token ids (rendered messages, an encoded text, or ids as sent), checked
        against the model's length; a refusal names the parameter at fault."""
        server = self.server
        if params.chat:
            assert params.messages is not None
            try:
                token_ids = server.codec.render_chat(params.messages, params.tools)
            except Exception as error:  # a template that refuses the messages: their fault
                raise bad_request(f"cannot render the messages: {error}", "messages") from None
        elif isinstance(params.prompt, str):
            if params.add_special_tokens:
                token_ids = server.codec.encode(params.prompt)
            else:
                token_ids = server.codec.encode(params.prompt, add_special_tokens=False)
        else:
            assert params.prompt is not None
            token_ids = params.prompt
        try:
            server.facts.limits.check(token_ids, params.max_tokens)
        except EngineError as error:
            param = "messages" if params.chat else "prompt"
            if "exceeds" in str(error) and len(token_ids) < server.facts.limits.max_model_len:
                param = params.max_tokens_param
            raise bad_request(str(error), param) from None
        return token_ids

    def logprobs_writer(self, params: GenerationRequest) -> LogprobsWriter | None:
        if params.logprobs is None:
            return None
        return LogprobsWriter(self.server.codec, params.chat)

    async def generate(self, request: Request, chat: bool):
        """One generation request: parsed, submitted, then streamed or answered whole."""
        engine_loop = self.engine_loop
        try:
            body = await self.body_of(request)
            params = parse_request(body, chat)
            _warn_unknown(body, chat)
            self.check_model(params.model)
            token_ids = self.prompt_ids(params)
            echo = ""
            if params.echo:
                prompt = params.prompt
                echo = prompt if isinstance(prompt, str) else self.server.codec.decode(token_ids)
            request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
            queue: asyncio.Queue = asyncio.Queue()
            submission = Submission(
                request_id,
                token_ids,
                params.max_tokens,
                params.temperature,
                params.ignore_eos,
                params.cache_salt,
                params.logprobs,
            )
            engine_loop.submit(submission, queue)
        except ApiError as error:
            return error_response(error)
        except ClientDisconnect:
            return Response(status_code=499)  # the client left while sending the body
        builder = ResponseBuilder(chat, self.server.model_name, request_id, params.include_usage)
        if params.stream:
            return EventStream(self.events(queue, builder, params, echo))
        try:
            answered, response = await unless_disconnected(
                request.receive, self.whole_answer(queue, builder, params, echo)
            )
        except Exception as error:  # a fault while answering: this request fails alone
            engine_loop.abort(request_id)
            logger.exception("pcache serve: an answer failed")
            grouped = getattr(error, "exceptions", None)  # a task group's ExceptionGroup
            if isinstance(grouped, tuple) and len(grouped) == 1:
                error = grouped[0]
            return error_response(internal_error(error))
        except BaseException:
            engine_loop.abort(request_id)  # nobody will read what it generates
            raise
        if not answered:
            engine_loop.abort(request_id)
            return Response(status_code=499)  # nobody reads it
        return response

    async def events(
        self, queue: asyncio.Queue, builder: ResponseBuilder, params, echo: str | None
    ):
        """The streamed answer: one server-sent event per piece, then `[DONE]`."""
        finished = False
        answer = Answer(self.server.codec, params)
        writer = self.logprobs_writer(params)
        try:
            if echo:
                yield builder.chunk(echo, None)
            while not finished:
                event = await queue.get()
                if isinstance(event, ApiError):
                    finished = True  # the engine is done with it
                    yield sse(event.body())
                    break
                piece = answer.push(event)
                finished = piece.finish_reason is not None
                if answer.ended_here:
                    self.engine_loop.abort(builder.request_id, "stop")
                logprobs = writer.write(piece.logprobs) if writer and piece.logprobs else None
                yield builder.chunk(piece.text, piece.finish_reason, logprobs, piece.stop_reason)
                if finished and builder.include_usage:
                    assert piece.usage is not None
                    yield builder.usage_chunk(piece.usage)
        except Exception as error:  # a fault while answering: the stream says so and ends
            logger.exception("pcache serve: a streamed answer failed")
            yield sse(internal_error(error).body())
        finally:
            if not finished:
                self.engine_loop.abort(builder.request_id)
        yield sse("[DONE]")

    async def whole_answer(self, queue: asyncio.Queue, builder: ResponseBuilder, params, echo: str):
        """The answer as one JSON body, once the engine has finished the request."""
        answer = Answer(self.server.codec, params)
        writer = self.logprobs_writer(params)
        parts: list[str] = [echo]
        entries: list = []
        while True:
            event = await queue.get()
            if isinstance(event, ApiError):
                return error_response(event)
            piece = answer.push(event)
            parts.append(piece.text)
            entries.extend(piece.logprobs)
            if piece.finish_reason is None:
                continue
            if answer.ended_here:
                self.engine_loop.abort(builder.request_id, "stop")
            logprobs = writer.write(entries) if writer else None
            assert piece.usage is not None
            body = builder.whole(
                "".join(parts), piece.finish_reason, piece.usage, logprobs, piece.stop_reason
            )
            return Response(orjson.dumps(body), media_type="application/json")
