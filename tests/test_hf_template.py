"""Hugging Face tokenizers and chat templates: pcache's own rendering equals transformers'."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pcache.cache.hashing import HashSettings, block_hashes
from pcache.errors import TokenizerError
from pcache.prompt.renderers.hf_template import load_hf_renderer, template_calls_clock
from pcache.prompt.renderers.provenance import json_pieces
from pcache.prompt.renderers.render import render, resolve_renderer
from pcache.prompt.shapes.request import Request, request_from_document
from pcache.text.jsonpath import get_path
from tests.conftest import ROOT, run_pcache
from tests.fixtures import HF_FIXTURES, hf_model_dir, hf_reference_tokenizer
from tests.fixtures.chat_corpus import CORPUS, PAIRS, PARALLEL_CALLS


def pcache_renderer(model: str):
    """Loaded once per model (through the same cache `--tokenizer` uses)."""
    return resolve_renderer(str(hf_model_dir(model)))


def to_request(document: dict, name: str = "case.json") -> Request:
    return request_from_document(copy.deepcopy(document), name)


def reference(model: str, request: Request, tokenize: bool = True):
    """transformers' apply_chat_template on the same messages and tools."""
    return hf_reference_tokenizer(model).apply_chat_template(
        copy.deepcopy(request.messages),
        tools=copy.deepcopy(request.tools) or None,
        add_generation_prompt=True,
        tokenize=tokenize,
        return_dict=False,
    )


def first_divergence(a: list[int], b: list[int]) -> int | None:
    for index, (left, right) in enumerate(zip(a, b, strict=False)):
        if left != right:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


# --- token ids and text equal transformers' -------------------------------------------------


@pytest.mark.parametrize("case", sorted(CORPUS))
@pytest.mark.parametrize("model", HF_FIXTURES)
def test_ids_and_text_equal_transformers(model: str, case: str):
    request = to_request(CORPUS[case])
    rendered = render(request, pcache_renderer(model))
    assert rendered.text == reference(model, request, tokenize=False)
    assert rendered.token_ids == reference(model, request)
    assert rendered.num_tokens > 10


@pytest.mark.parametrize("model", HF_FIXTURES)
def test_template_refusal_is_a_one_line_tokenizer_error(model: str):
    import jinja2

    request = to_request(PARALLEL_CALLS)
    try:
        expected = reference(model, request)
    except jinja2.TemplateError as refusal:  # Llama 3.1: one tool call at a time
        with pytest.raises(TokenizerError, match="refused the request") as raised:
            render(request, pcache_renderer(model))
        assert str(refusal) in str(raised.value)
        assert "\n" not in str(raised.value)
    else:
        assert render(request, pcache_renderer(model)).token_ids == expected


@pytest.mark.parametrize("model", HF_FIXTURES)
def test_token_starts_follow_offsets_on_unicode(model: str):
    renderer = pcache_renderer(model)
    text = render(to_request(CORPUS["unicode"]), renderer).text
    raw_starts = [start for start, _ in renderer.tokenizer.encode(text).offsets]
    assert raw_starts == sorted(raw_starts), "tokenizer offsets went backwards"
    ids, starts = renderer.encode_with_starts(text)
    assert starts == raw_starts and len(ids) == len(starts)
    assert all(0 <= start < len(text) for start in starts)
    assert len(set(starts)) < len(starts), "byte-level pieces of one character share a start"


_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=30)
_tools = st.lists(
    st.sampled_from([c["tools"][0] for c in CORPUS.values() if "tools" in c]),
    max_size=3,
    unique_by=lambda tool: json.dumps(tool),
)


@st.composite
def conversations(draw) -> dict:
    messages = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(_text)})
    for turn in range(draw(st.integers(1, 3))):
        if turn:
            messages.append({"role": "assistant", "content": draw(_text)})
        messages.append({"role": "user", "content": draw(_text)})
    return {"messages": messages, "tools": draw(_tools)}


@pytest.mark.parametrize("model", HF_FIXTURES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=conversations())
def test_generated_conversations_equal_transformers(model: str, document: dict):
    request = to_request(document)
    assert render(request, pcache_renderer(model)).token_ids == reference(model, request)


# --- first divergence --------------------------------------------------------------------------

PAIR_PATHS = {
    "timestamp-in-system": "messages[0].content",
    "tool-order": "tools[0]",
    "key-order": "tools[0].function.parameters",
    "appended-turn": "messages[6].content",
    "arguments-spacing": "messages[2].tool_calls[0].function.arguments",
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("model", HF_FIXTURES)
def test_first_divergence_equals_transformers(model: str, pair: str):
    renderer = pcache_renderer(model)
    left, right = (to_request(document) for document in PAIRS[pair])
    ours = [render(request, renderer) for request in (left, right)]
    expected = first_divergence(reference(model, left), reference(model, right))
    found = first_divergence(ours[0].token_ids, ours[1].token_ids)
    assert found == expected and found is not None
    assert (ours[1].token_path(found) or "").startswith(PAIR_PATHS[pair]), ours[1].token_path(found)


@pytest.mark.parametrize("pair", sorted(PAIRS))
@pytest.mark.parametrize("model", HF_FIXTURES)
def test_diff_command_reports_transformers_divergence(cli, tmp_path: Path, model: str, pair: str):
    files = []
    for side, document in zip("ab", PAIRS[pair], strict=True):
        files.append(tmp_path / f"{side}.json")
        files[-1].write_text(json.dumps(document), encoding="utf-8")
    result = cli("diff", *files, "-t", hf_model_dir(model), "-f", "json")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    left, right = (to_request(document) for document in PAIRS[pair])
    expected = first_divergence(reference(model, left), reference(model, right))
    assert report["first_divergence_token"] == expected
    assert report["num_tokens"] == [len(reference(model, left)), len(reference(model, right))]
    assert report["cause"]["b_path"].startswith(PAIR_PATHS[pair]), report["cause"]


# --- provenance --------------------------------------------------------------------------------


def _leaf_forms(value: str) -> set[str]:
    dumped = json.dumps(value, ensure_ascii=False)
    return {value, value.strip(), dumped[1:-1]}


@pytest.mark.parametrize("case", sorted(CORPUS))
@pytest.mark.parametrize("model", HF_FIXTURES)
def test_spans_are_sorted_disjoint_and_point_at_their_values(model: str, case: str):
    request = to_request(CORPUS[case])
    rendered = render(request, pcache_renderer(model))
    normalized = {"messages": request.messages, "tools": request.tools}
    previous_end = 0
    for span in rendered.spans:
        assert previous_end <= span.start < span.end <= len(rendered.text)
        previous_end = span.end
        text = rendered.text[span.start : span.end]
        value = get_path(normalized, span.normalized)
        assert value is not None, span
        if isinstance(value, str):
            dumped = json.dumps(value, ensure_ascii=False)
            assert text in _leaf_forms(value) or text.endswith(dumped), (span, text)
        elif not isinstance(value, dict | list):
            assert text.endswith(json.dumps(value)), (span, text)
    paths = {span.normalized for span in rendered.spans}
    if model == "qwen2.5":  # renders every message content unchanged
        for index, message in enumerate(request.messages):
            if message.get("content"):
                assert f"messages[{index}].content" in paths
        for index in range(len(request.tools)):
            assert any(path.startswith(f"tools[{index}]") for path in paths)


def test_spans_map_back_to_the_users_json_paths():
    rendered = render(to_request(CORPUS["anthropic-shape"]), pcache_renderer("qwen2.5"))
    sources = {span.path for span in rendered.spans}
    assert "system[0].text" in sources
    assert "messages[0].content[0].text" in sources
    assert "tools[0].input_schema.properties.city.type" in sources
    assert "messages[2].content[0]" in sources or "messages[2].content[0].content" in sources
    located = {span.path: rendered.text[span.start : span.end] for span in rendered.spans}
    assert located["system[0].text"] == CORPUS["anthropic-shape"]["system"][0]["text"]


@settings(max_examples=40, deadline=None)
@given(document=conversations())
def test_message_text_is_placed_exactly(document: dict):
    """Even a message like "user" lands on its own text, not on the template's role header."""
    request = to_request(document)
    rendered = render(request, pcache_renderer("qwen2.5"))
    by_path = {span.normalized: span for span in rendered.spans}
    for index, message in enumerate(request.messages):
        span = by_path[f"messages[{index}].content"]
        assert rendered.text[span.start : span.end] == message["content"]
        assert rendered.text[: span.start].endswith(f"<|im_start|>{message['role']}\n")


@pytest.mark.parametrize("content", ["user", "assistant", "im", "\n", "<|im_end|>"])
def test_words_of_the_template_are_placed_exactly(content: str):
    document = {"messages": [{"role": "user", "content": content}] * 2}
    rendered = render(to_request(document), pcache_renderer("qwen2.5"))
    starts = [span.start for span in rendered.spans]
    assert len(starts) == 2
    assert [rendered.text[:start].endswith("<|im_start|>user\n") for start in starts] == [True] * 2


def test_templates_that_cut_text_fall_back_to_search(tmp_path: Path):
    source = "{% for m in messages %}[{{ m.content | trim }}]{% endfor %}"
    renderer = load_hf_renderer(str(_model_dir(tmp_path, source)))
    request = to_request({"messages": [{"role": "user", "content": "  padded  "}]})
    text, spans = renderer.render_text(request, _options("2026-01-01"))
    assert text == "[padded]"
    assert [(span.start, span.end, span.path) for span in spans] == [(1, 7, "messages[0].content")]


def test_unbalanced_sentinels_are_refused():
    from pcache.prompt.renderers.marked_render import CLOSE, FIRST_ID, OPEN, strip_sentinels

    opened = OPEN + chr(FIRST_ID)
    assert strip_sentinels(f"a{opened}b{CLOSE}c", ["p"]) == ("abc", [(1, 2, "p")])
    for broken in (f"{opened}b", f"b{CLOSE}", f"{opened}{opened}b{CLOSE}{CLOSE}"):
        with pytest.raises(ValueError):
            strip_sentinels(broken, ["p"])


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_text, children, max_size=3),
    max_leaves=12,
)


@given(value=JSON_VALUES, indent=st.sampled_from([None, 2, 4]))
def test_json_pieces_rebuild_json_dumps(value, indent):
    pieces = json_pieces(value, "tools[0]", indent)
    expected = json.dumps(value, ensure_ascii=False, indent=indent)
    assert "".join(text for text, _ in pieces) == expected
    assert all(path.startswith("tools[0]") for _, path in pieces)


# --- through the CLI ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", HF_FIXTURES)
def test_hash_command_hashes_transformers_ids(cli, tmp_path: Path, model: str):
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(CORPUS["tools-one-call"]), encoding="utf-8")
    directory = str(hf_model_dir(model))
    result = cli("hash", request_file, "-t", directory, "--hash-algo", "sha256_cbor", "-f", "json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    expected = reference(model, to_request(CORPUS["tools-one-call"]))
    assert record["num_tokens"] == len(expected)
    hashes = block_hashes(expected, HashSettings(algo="sha256_cbor", block_size=16))
    assert record["block_hashes"] == [digest.hex() for digest in hashes]
    assert record["tokenizer"] == pcache_renderer(model).name


def test_runtime_path_imports_neither_transformers_nor_torch(tmp_path: Path):
    script = (
        "import sys, json\n"
        "from pcache.prompt.renderers.hf_template import load_hf_renderer\n"
        "from pcache.prompt.renderers.render import render\n"
        "from pcache.prompt.shapes.request import request_from_document\n"
        f"renderer = load_hf_renderer({str(hf_model_dir('qwen3'))!r})\n"
        f"doc = json.loads({json.dumps(json.dumps(CORPUS['tools-one-call']))})\n"
        "render(request_from_document(doc, 'x.json'), renderer)\n"
        "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


# --- failures ----------------------------------------------------------------------------------


def test_offline_hub_id_fails_at_once(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    started = time.perf_counter()
    with pytest.raises(TokenizerError, match="not in the local Hugging Face"):
        load_hf_renderer("pcache-test-org/no-such-model")
    assert time.perf_counter() - started < 2.0


def test_hub_id_in_the_local_cache_loads_offline(monkeypatch, tmp_path: Path):
    from huggingface_hub import constants

    snapshot = tmp_path / "models--pcache-test--qwen3" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (snapshot / name).symlink_to(hf_model_dir("qwen3") / name)
    (tmp_path / "models--pcache-test--qwen3" / "refs").mkdir()
    (tmp_path / "models--pcache-test--qwen3" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    renderer = load_hf_renderer("pcache-test/qwen3")
    assert renderer.name.startswith("hf:pcache-test/qwen3@")
    assert renderer.template_digest == pcache_renderer("qwen3").template_digest
    request = to_request(CORPUS["tools-one-call"])
    assert render(request, renderer).token_ids == reference("qwen3", request)


def test_unreachable_hub_fails_at_once(monkeypatch, tmp_path: Path):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # discard port: refused
    started = time.perf_counter()
    with pytest.raises(TokenizerError, match="cannot be reached"):
        load_hf_renderer("pcache-test-org/no-such-model")
    assert time.perf_counter() - started < 2.0


def test_cli_unknown_hub_id_exits_2_with_one_line(tmp_path: Path):
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(CORPUS["single-user"]), encoding="utf-8")
    done = run_pcache("hash", request_file, "-t", "some-org/some-model", timeout=30)
    assert done.returncode == 2
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "some-org/some-model" in lines[0], lines
    assert "not in the local Hugging Face" in lines[0]


def _tiny_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, models

    vocab = {"[UNK]": 0} | {chr(code): code for code in range(32, 127)}
    tokenizer = Tokenizer(models.BPE(vocab, [], unk_token="[UNK]"))  # one token per character
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))


def _model_dir(tmp_path: Path, template: str | None, config: str | None = None) -> Path:
    directory = tmp_path / "model"
    _tiny_tokenizer(directory)
    if template is not None:
        (directory / "chat_template.jinja").write_text(template, encoding="utf-8")
    if config is not None:
        (directory / "tokenizer_config.json").write_text(config, encoding="utf-8")
    return directory


BAD_DIRS = {
    "missing-dir": (None, None, "no such directory"),
    "no-tokenizer-json": ("", None, "no tokenizer.json"),
    "no-template": (None, "{}", "no chat template"),
    "template-does-not-parse": ("{% if messages %}{{ x }", None, "does not parse"),
    "raise-exception": ("{{ raise_exception('only chat, please') }}", None, "only chat, please"),
    "sandbox-escape": ("{{ messages.__class__.__mro__ }}", None, "template failed"),
    "underscore-namespace": ("{% set ns = namespace(_x=1) %}", None, "template failed"),
    "bad-config-json": (None, '{"chat_template": "x",\n  oops}', "tokenizer_config.json:2:3"),
}


@pytest.mark.parametrize("case", sorted(BAD_DIRS))
def test_bad_model_dirs_give_one_line_errors(cli, tmp_path: Path, case: str):
    template, config, message = BAD_DIRS[case]
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(CORPUS["single-user"]), encoding="utf-8")
    if case == "missing-dir":
        directory = tmp_path / "nope"
    else:
        directory = _model_dir(tmp_path, template, config)
        if case == "no-tokenizer-json":
            (directory / "tokenizer.json").unlink()
    result = cli("hash", request_file, "-t", directory)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_a_file_is_not_a_model_dir(cli, tmp_path: Path):
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(CORPUS["single-user"]), encoding="utf-8")
    result = cli("hash", request_file, "-t", request_file)
    assert result.exit_code == 2
    assert "must be a directory" in result.stderr


def test_named_templates_and_special_tokens_from_the_config(tmp_path: Path):
    config = {
        "chat_template": [
            {"name": "default", "template": "D {{ eos_token }} {{ messages[0].content }}"},
            {"name": "tool_use", "template": "T {{ bos_token }} {{ tools | length }}"},
        ],
        "eos_token": {"content": "</s>", "__type": "AddedToken"},
    }
    directory = _model_dir(tmp_path, None, json.dumps(config))
    (directory / "special_tokens_map.json").write_text(json.dumps({"bos_token": "<s>"}))
    renderer = load_hf_renderer(str(directory))
    plain = to_request(CORPUS["single-user"])
    with_tools = to_request(CORPUS["tools-varied-schemas"])
    assert renderer.render_text(plain, _options("2026-01-01"))[0] == "D </s> Hello there!"
    assert renderer.render_text(with_tools, _options("2026-01-01"))[0] == "T <s> 4"


# --- clock ---------------------------------------------------------------------------------------


def test_template_calls_clock(tmp_path: Path):
    dated = _model_dir(tmp_path, "Today: {{ strftime_now('%d %b %Y') }}\n{{ messages[0].content }}")
    assert template_calls_clock(load_hf_renderer(str(dated)))
    assert not template_calls_clock(pcache_renderer("qwen2.5"))
    assert not template_calls_clock(pcache_renderer("llama3.1"))  # a constant date_string
    assert template_calls_clock(resolve_renderer("gpt-oss"))  # "Current date:" in harmony
    assert not template_calls_clock(resolve_renderer("o200k_base"))


def test_clock_in_an_untaken_branch_is_not_a_clock(tmp_path: Path):
    source = "{% if false %}{{ strftime_now('%Y') }}{% endif %}{{ messages[0].content }}"
    assert not template_calls_clock(load_hf_renderer(str(_model_dir(tmp_path, source))))


def test_date_option_pins_strftime_now(cli, tmp_path: Path):
    dated = _model_dir(tmp_path, "{{ strftime_now('%Y-%m-%d') }} {{ messages[0].content }}")
    request_file = tmp_path / "request.json"
    request_file.write_text(json.dumps(CORPUS["single-user"]), encoding="utf-8")
    renderer = load_hf_renderer(str(dated))
    text, _ = renderer.render_text(to_request(CORPUS["single-user"]), _options("2024-02-29"))
    assert text == "2024-02-29 Hello there!"
    outputs = [
        cli("hash", request_file, "-t", dated, "--date", date, "-b", "1", "-f", "json").stdout
        for date in ("2024-02-29", "2024-02-29", "2025-01-01")
    ]
    assert outputs[0] == outputs[1] != outputs[2]


def _options(date: str):
    from pcache.prompt.renderers.interface import RenderOptions

    return RenderOptions(date=date)


def test_a_date_free_renderer_is_probed_once_per_lint(monkeypatch):
    """PC102 remembers a renderer's answer, `False` included, instead of rendering every
    request twice more."""
    import pcache.api
    import pcache.prompt.renderers.hf_template as hf_template

    calls = []

    def counting(renderer, request=None):
        calls.append(renderer.name)
        return template_calls_clock(renderer, request)

    monkeypatch.setattr(hf_template, "template_calls_clock", counting)
    bodies = [
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": u}]}
        for u in ("one", "two", "three", "four")
    ]
    pcache.api.lint(bodies, tokenizer="o200k_base", select=["PC102"])
    assert calls == ["tiktoken:o200k_base"]
