"""vLLM's auxiliary routes: `POST /tokenize`, `POST /detokenize`, `GET /version`.

`/tokenize` takes a text `prompt` (`add_special_tokens`, default true: the model's BOS as
its tokenizer config says) or chat `messages` (rendered with the generation prompt, as the
chat route renders them; `add_special_tokens` default false) and answers vLLM's
`{"count", "max_model_len", "tokens", "token_strs"}`; `/detokenize` turns `tokens` back into
`{"prompt": text}`. Clients such as `vllm bench serve` and `pcache replay --endpoint` use them
to count tokens as the server does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pcache.serve import fields
from pcache.serve.api_error import ApiError, bad_request
from pcache.serve.protocol import messages_of, tools_of


def _error(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def auxiliary_routes(
    server: Any,
    body_of: Callable[[Request], Awaitable[Any]],
    check_model: Callable[[str | None], None],
) -> list[Route]:
    codec = server.codec

    def tokens_of(body: dict) -> list[int]:
        if "messages" in body:
            if fields.optional_bool(body, "add_generation_prompt") is False:
                raise bad_request(
                    "rendering without the generation prompt is not supported",
                    "add_generation_prompt",
                )
            if fields.optional_bool(body, "add_special_tokens"):
                raise bad_request(
                    "special tokens added to a rendered chat are not supported",
                    "add_special_tokens",
                )
            try:
                return codec.render_chat(messages_of(body), tools_of(body))
            except ApiError:
                raise
            except Exception as error:
                raise bad_request(f"cannot render the messages: {error}", "messages") from None
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise bad_request("`prompt` must be a string (or send `messages`)", "prompt")
        if fields.optional_bool(body, "add_special_tokens") is False:
            return codec.encode(prompt, add_special_tokens=False)
        return codec.encode(prompt)

    async def read(request: Request) -> dict:
        body = await body_of(request)
        if not isinstance(body, dict):
            raise bad_request("the request body must be a JSON object")
        check_model(fields.optional_str(body, "model"))
        return body

    async def tokenize(request: Request) -> Response:
        try:
            body = await read(request)
            token_ids = tokens_of(body)
            with_strings = fields.optional_bool(body, "return_token_strs")
        except ApiError as error:
            return _error(error)
        except ClientDisconnect:
            return Response(status_code=499)
        strings = [codec.token_text(token) for token in token_ids] if with_strings else None
        return JSONResponse(
            {
                "count": len(token_ids),
                "max_model_len": server.facts.limits.max_model_len,
                "tokens": token_ids,
                "token_strs": strings,
            }
        )

    async def detokenize(request: Request) -> Response:
        try:
            body = await read(request)
            tokens = body.get("tokens")
            vocab = server.facts.limits.vocab_size
            if not isinstance(tokens, list) or not all(
                type(token) is int and 0 <= token < vocab for token in tokens
            ):
                raise bad_request(f"`tokens` must be a list of token ids in [0, {vocab})", "tokens")
        except ApiError as error:
            return _error(error)
        except ClientDisconnect:
            return Response(status_code=499)
        return JSONResponse({"prompt": codec.decode(tokens)})

    async def version(request: Request) -> Response:
        from pcache.version import __version__

        return JSONResponse({"version": __version__})

    return [
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/detokenize", detokenize, methods=["POST"]),
        Route("/version", version, methods=["GET"]),
    ]
