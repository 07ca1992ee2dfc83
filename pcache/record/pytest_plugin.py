"""pytest plugin (entry point `pytest11`): the `pcache_recorder` fixture.

def test_agent_keeps_its_prefix(pcache_recorder):
    pcache_recorder.respond(chat_completion("Hi!"), chat_completion("Bye!"))
    client = OpenAI(api_key="test", http_client=pcache_recorder.client())
    run_agent(client)
    assert_prefix_stable(pcache_recorder.requests)
"""

from __future__ import annotations

import pytest

from pcache.record.recorder import Recorder


@pytest.fixture
def pcache_recorder(tmp_path):
    """A `pcache.record.recorder.Recorder` writing to the test's temporary directory."""
    recorder = Recorder(tmp_path / "pcache-requests.jsonl")
    yield recorder
    recorder.close()
