"""Recordings hold prompts: a file pcache records to is created readable by its owner only."""

from __future__ import annotations

import os
import stat

import httpx2
import openai
import pytest

from pcache.record import Transport
from pcache.record.canned import CannedResponses, chat_completion


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_recording_the_transport_creates_is_0600(tmp_path):
    path = tmp_path / "deep" / "requests.jsonl"
    canned = httpx2.MockTransport(CannedResponses([chat_completion("ok")]))
    client = openai.OpenAI(
        api_key="sk-x", http_client=httpx2.Client(transport=Transport(path, canned))
    )
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "secret"}])
    assert path.exists() and mode_of(path) == 0o600


def test_an_existing_recording_keeps_its_mode(tmp_path):
    from pcache.record.writer import LineWriter

    path = tmp_path / "shared.jsonl"
    path.write_bytes(b"")
    path.chmod(0o640)
    writer = LineWriter(path)
    assert writer.write(b"{}\n")
    writer.close()
    assert mode_of(path) == 0o640 and path.read_bytes() == b"{}\n"


def test_the_litellm_recorder_creates_0600(tmp_path):
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    pytest.importorskip("litellm")
    from pcache.record.litellm_logger import LiteLLMRecorder

    path = tmp_path / "litellm.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": "secret"}]}
    kwargs = {"additional_args": {"complete_input_dict": body}, "litellm_params": {}}
    LiteLLMRecorder(path).record(kwargs, {"usage": {"prompt_tokens": 3}}, None)
    assert path.exists() and mode_of(path) == 0o600
