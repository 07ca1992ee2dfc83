"""Who may use `pcache serve`: `--api-key` on every route but /health (and /metrics), the admin
routes' rule, the warnings of an exposed server, and `replay --endpoint` sending the key."""

from __future__ import annotations

import orjson
import pytest

pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from tests.serve_helpers import serve_process, served  # noqa: E402

KEY = "sk-test-0123456789"
GUARDED = [
    ("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1}),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}),
    ("GET", "/v1/models", None),
    ("POST", "/tokenize", {"prompt": "hi"}),
    ("POST", "/detokenize", {"tokens": [1, 2]}),
    ("GET", "/version", None),
    ("POST", "/reset_prefix_cache", None),
    ("POST", "/flush_cache", None),
    ("GET", "/no/such/route", None),
]


@pytest.fixture(scope="module")
def keyed():
    with served(api_key=KEY) as (url, _):
        yield url


def call(url: str, method: str, path: str, body, **headers: str) -> httpx.Response:
    return httpx.request(method, url + path, json=body, headers=headers, timeout=30)


@pytest.mark.parametrize(("method", "path", "body"), GUARDED)
def test_every_route_but_health_needs_the_key(keyed, method, path, body):
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {KEY}"}):
        response = call(keyed, method, path, body, **headers)
        assert response.status_code == 401, (headers, response.text)
        error = response.json()["error"]
        assert error["type"] == "invalid_request_error" and error["code"] == "invalid_api_key"
        assert "API key" in error["message"] and KEY not in response.text
        assert response.headers["www-authenticate"] == "Bearer"
    answered = call(keyed, method, path, body, authorization=f"Bearer {KEY}")
    assert answered.status_code != 401, answered.text
    assert answered.status_code == (404 if path == "/no/such/route" else 200), answered.text


def test_health_and_metrics_stay_open_unless_metrics_auth(keyed):
    assert httpx.get(f"{keyed}/health").status_code == 200
    assert httpx.get(f"{keyed}/metrics").status_code == 200
    with served(api_key=KEY, metrics_auth=True) as (url, _):
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/metrics").status_code == 401
        page = httpx.get(f"{url}/metrics", headers={"authorization": f"Bearer {KEY}"})
        assert page.status_code == 200 and "pcache:cache_config_info" in page.text


def test_the_openai_sdk_against_a_keyed_server(keyed):
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{keyed}/v1", api_key=KEY, max_retries=0, timeout=30)
    answer = client.completions.create(model="tiny", prompt="hello", max_tokens=3)
    assert answer.usage.completion_tokens == 3
    chunks = list(
        client.chat.completions.create(
            model="tiny",
            messages=[{"role": "user", "content": "hello"}],
            max_tokens=3,
            stream=True,
        )
    )
    assert chunks and chunks[-1].choices[0].finish_reason == "length"
    assert [model.id for model in client.models.list()] == ["tiny"]
    stranger = openai.OpenAI(base_url=f"{keyed}/v1", api_key="sk-wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        stranger.completions.create(model="tiny", prompt="hello", max_tokens=3)
    assert refused.value.status_code == 401 and refused.value.code == "invalid_api_key"


def test_admin_routes_without_a_key_answer_only_where_allowed():
    with served(admin_routes=False) as (url, _):
        for path in ("/reset_prefix_cache", "/flush_cache"):
            refused = httpx.post(url + path)
            assert refused.status_code == 403, refused.text
            error = refused.json()["error"]
            assert (
                error["type"] == "permission_error" and "--enable-admin-routes" in error["message"]
            )
        assert call(url, *GUARDED[0]).status_code == 200  # the rest answers as before
    with served() as (url, _):  # loopback, no key: local measurement resets the cache
        assert httpx.post(f"{url}/reset_prefix_cache").status_code == 200


def test_the_cli_reads_the_key_from_the_environment_and_warns_of_exposure():
    from pcache.cli.serve import exposure_warnings
    from pcache.serve.auth import is_loopback

    assert exposure_warnings("127.0.0.1", None, None) == []
    assert exposure_warnings("0.0.0.0", KEY, "5557") == []
    (warning,) = exposure_warnings("0.0.0.0", None, None)
    assert "without --api-key" in warning
    (warning,) = exposure_warnings("::1", KEY, "tcp://*:5557")
    assert "every interface" in warning and "token ids" in warning
    assert [
        is_loopback(h) for h in ("localhost", "127.0.0.2", "::1", "0.0.0.0", "example.com")
    ] == [
        True,
        True,
        True,
        False,
        False,
    ]
    with serve_process("--model", "tiny", env={"VLLM_API_KEY": KEY}) as url:
        assert httpx.get(f"{url}/v1/models").status_code == 401
        assert httpx.get(f"{url}/v1/models", headers={"authorization": f"Bearer {KEY}"}).is_success


def test_an_empty_key_or_metrics_auth_alone_is_a_usage_error(cli):
    for arguments in (("--api-key", " "), ("--metrics-auth",)):
        result = cli("serve", "--model", "tiny", "--port", "0", *arguments)
        assert result.exit_code == 2, result.output
        assert "--api-key" in result.output and "Traceback" not in result.output


def test_replay_endpoint_sends_the_key_to_requests_and_to_the_cache_reset(
    tmp_path, cli, keyed, monkeypatch
):
    prompt = list(range(1, 80))
    trace = tmp_path / "trace.jsonl"
    trace.write_bytes(orjson.dumps({"token_ids": prompt, "output_length": 1}) + b"\n")
    headers = {"authorization": f"Bearer {KEY}"}
    body = {"prompt": prompt, "max_tokens": 1}
    assert httpx.post(f"{keyed}/v1/completions", json=body, headers=headers).is_success
    arguments = (
        "replay", trace, "--endpoint", f"{keyed}/v1", "--model", "tiny", "--reset-cache",
        "--max-concurrency", "1", "--format", "json",
    )  # fmt: skip
    monkeypatch.setenv("PCACHE_TEST_KEY", KEY)
    result = cli(*arguments, "--api-key-env", "PCACHE_TEST_KEY")
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    assert data["completed"] == 1 and data["cached_tokens"] == [0]  # the reset got through
    assert not any("reset" in note for note in data.get("notes", [])), data.get("notes")
    assert KEY not in result.output
    monkeypatch.delenv("PCACHE_TEST_KEY")
    refused = cli(*arguments, "--api-key-env", "PCACHE_TEST_KEY")
    data = orjson.loads(refused.stdout)
    assert data["completed"] == 0 and "401" in data["errors"][0], data["errors"]


def test_kv_events_on_a_bare_port_bind_loopback_only():
    zmq = pytest.importorskip("zmq")
    pytest.importorskip("msgpack")
    from pcache.replayer.endpoint.kv_events import KVEventSubscriber
    from pcache.serve.kv_events import KVEventPublisher, is_wildcard, resolve
    from tests.test_kv_events import free_port

    port = free_port()
    assert resolve(str(port)) == (f"tcp://127.0.0.1:{port}", True)
    assert resolve("tcp://127.0.0.1:5557") == ("tcp://127.0.0.1:5557", False)  # vLLM's rule
    assert [is_wildcard(e) for e in ("5557", "tcp://*:5557", "tcp://[::]:1", "ipc:///x")] == [
        False,
        True,
        True,
        False,
    ]
    publisher = KVEventPublisher(str(port))
    publisher.open()
    try:
        bound = publisher._socket.getsockopt(zmq.LAST_ENDPOINT).decode()
        assert bound == f"tcp://127.0.0.1:{port}"
    finally:
        publisher.close()
    with served(kv_events=str(port), api_key=KEY) as (url, _):
        subscriber = KVEventSubscriber(f"tcp://127.0.0.1:{port}")  # in use: it connects
        subscriber.start()
        headers = {"authorization": f"Bearer {KEY}"}
        body = {"prompt": list(range(1, 40)), "max_tokens": 1}
        assert httpx.post(f"{url}/v1/completions", json=body, headers=headers).is_success
        received = subscriber.stop()
    assert any(event["type"] == "BlockStored" for event in received.events)


@pytest.mark.parametrize("endpoint", ["0", "70000", "tcp://127.0.0.1:x", "tcp://h:", "a" * 5000])
def test_a_bad_kv_events_port_is_a_usage_error(endpoint):
    from pcache.errors import UsageError
    from pcache.serve.kv_events import check_endpoint

    with pytest.raises(UsageError, match="--kv-events"):
        check_endpoint(endpoint)
