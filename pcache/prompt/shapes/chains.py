"""Responses API conversations chained by `previous_response_id`, rebuilt from one log.

A line that records a Responses request together with its response (`"response": {"id",
"output"}`, as the recorder writes it) registers that response's conversation: the
conversation it continued, its own input items and the response's output items. A later line
whose `previous_response_id` names it gets those items under `responses.CHAIN_KEY`, so the
reader builds the prompt the server sees. `instructions` are not carried over, as the API
documents. A parent the log does not hold is left unmarked: the reader reports it.
"""

from __future__ import annotations

from typing import Any

from pcache.prompt.shapes.responses import CHAIN_KEY, input_items


class ResponseChains:
    """The conversations of the responses seen so far in one stream of lines."""

    def __init__(self) -> None:
        self.items_of: dict[str, list[Any]] = {}

    def prepare(self, value: Any) -> Any:
        """`value` with its earlier conversation attached (a new dict), or `value` itself."""
        if type(value) is not dict:
            return value
        body = value.get("body", value)
        if type(body) is not dict or ("input" not in body and "previous_response_id" not in body):
            return value
        parent = body.get("previous_response_id")
        before: list[Any] = []
        if isinstance(parent, str) and parent in self.items_of:
            before = self.items_of[parent]
            value = {**value, CHAIN_KEY: before}
        response = value.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            output = response.get("output")
            if isinstance(output, list):  # else the response is not usable: not registered
                after = [item for item in output if isinstance(item, dict)]
                self.items_of[response["id"]] = before + input_items(body) + after
        return value
