"""Small tool-using agents on the OpenAI Responses API and on google-genai's generateContent.

Like `tests.sdk_agents`: one question answered with one tool call, the result fed back, then a
follow-up turn (three requests). The Responses agent continues each turn by
`previous_response_id`, as the Agents SDK does by default; `clock` puts the time in the
instructions (the planted breaker).
"""

from __future__ import annotations

from collections.abc import Callable

from pcache.record.canned import gemini_response, openai_response
from tests.sdk_agents import PARCEL_TOOL, SYSTEM, lookup


def responses_canned() -> list[dict]:
    def usage(cached: int) -> dict:
        return {
            "input_tokens": 400,
            "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": 9,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 409,
        }

    return [
        openai_response(
            function_calls=[("call_1", "parcel_status", {"parcel_id": "P-42"})],
            usage=usage(0),
            response_id="resp_1",
        ),
        openai_response(
            "Your parcel P-42 is out for delivery, arriving at 14:00.",
            usage=usage(256),
            response_id="resp_2",
        ),
        openai_response("You're welcome!", usage=usage(384), response_id="resp_3"),
    ]


def responses_agent(client, clock: Callable[[], str] | None = None) -> str:
    tools = [
        {
            "type": "function",
            "name": PARCEL_TOOL["name"],
            "description": PARCEL_TOOL["description"],
            "parameters": PARCEL_TOOL["schema"],
            "strict": False,
        }
    ]

    def instructions() -> str:
        return SYSTEM if clock is None else f"{SYSTEM}Current time: {clock()}."

    pending: list[dict] = [{"role": "user", "content": "Where is my parcel P-42?"}]
    previous = None
    answer = ""
    for follow_up in (None, "Thanks!"):
        if follow_up:
            pending = [{"role": "user", "content": follow_up}]
        while True:
            extra = {"previous_response_id": previous} if previous else {}
            response = client.responses.create(
                model="gpt-5",
                instructions=instructions(),
                input=pending,
                tools=tools,
                prompt_cache_key="parcels",
                **extra,
            )
            previous = response.id
            calls = [item for item in response.output if item.type == "function_call"]
            if not calls:
                answer = response.output_text
                break
            pending = [
                {
                    "type": "function_call_output",
                    "call_id": call.call_id,
                    "output": lookup("P-42"),
                }
                for call in calls
            ]
    return answer


def gemini_canned() -> list[dict]:
    def usage(cached: int) -> dict:
        return {
            "promptTokenCount": 400,
            "candidatesTokenCount": 9,
            "cachedContentTokenCount": cached,
        }

    return [
        gemini_response(function_calls=[("parcel_status", {"parcel_id": "P-42"})], usage=usage(0)),
        gemini_response("Your parcel P-42 is out for delivery.", usage=usage(256)),
        gemini_response("You're welcome!", usage=usage(384)),
    ]


def gemini_agent(client, clock: Callable[[], str] | None = None) -> str:
    from google.genai import types

    declaration = types.FunctionDeclaration(
        name=PARCEL_TOOL["name"],
        description=PARCEL_TOOL["description"],
        parameters_json_schema=PARCEL_TOOL["schema"],
    )
    history: list[types.Content] = [
        types.Content(role="user", parts=[types.Part(text="Where is my parcel P-42?")])
    ]
    answer = ""
    for follow_up in (None, "Thanks!"):
        if follow_up:
            history.append(types.Content(role="user", parts=[types.Part(text=follow_up)]))
        while True:
            system = SYSTEM if clock is None else f"{SYSTEM}Current time: {clock()}."
            response = client.models.generate_content(
                model="gemini-2.5-flash",
                contents=history,
                config=types.GenerateContentConfig(
                    system_instruction=system,
                    tools=[types.Tool(function_declarations=[declaration])],
                    automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
                ),
            )
            content = response.candidates[0].content
            history.append(content)
            calls = [part.function_call for part in content.parts if part.function_call]
            if not calls:
                answer = response.text or ""
                break
            history.append(
                types.Content(
                    role="user",
                    parts=[
                        types.Part(
                            function_response=types.FunctionResponse(
                                name=call.name, response={"output": lookup("P-42")}
                            )
                        )
                        for call in calls
                    ],
                )
            )
    return answer
