"""`pcache generate`: JSON output, and one-line errors (exit 2) for every broken model input."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tests.conftest import run_pcache  # noqa: E402

SHARED = list(range(1, 18))
PROMPTS = [[*SHARED, 20, 21], [*SHARED, 30], [5, 6, 7]]


@pytest.fixture
def prompt_file(tmp_path):
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(PROMPTS))
    return path


def generate_json(cli, *args):
    result = cli("generate", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_has_outputs_and_cached_tokens(cli, prompt_file):
    data = generate_json(cli, "--model", "tiny", "--prompt-ids", prompt_file, "-n", "5")
    assert data["cached_tokens"] == [0, 16, 0]  # the second prompt hits the first's block
    assert data["prompt_tokens"] == [19, 18, 3]
    assert [len(output) for output in data["outputs"]] == [5, 5, 5]
    assert list(data) == sorted(data)

    from pcache.engine.config import EngineConfig
    from pcache.engine.engine import Engine

    engine = Engine(EngineConfig(model="tiny", enable_prefix_caching=False))
    expected = [s.output_token_ids for s in engine.generate(PROMPTS, 5)]
    assert data["outputs"] == expected
    cold = generate_json(
        cli, "--model", "tiny", "--prompt-ids", prompt_file, "-n", "5", "--no-prefix-cache"
    )
    assert cold["cached_tokens"] == [0, 0, 0] and cold["outputs"] == expected


def test_text_prompt_and_text_output(cli):
    result = cli("generate", "--model", "tiny-llama", "--prompt", "hello there", "-n", "3")
    assert result.exit_code == 0, result.output
    assert "prompt 0: 11 tokens, 0 cached" in result.stdout
    data = generate_json(cli, "--model", "tiny-llama", "--prompt", "hello there", "-n", "3")
    assert len(data["outputs"][0]) == 3 and len(data["texts"]) == 1


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from tests.engine_helpers import save_reference_checkpoint

    directory = tmp_path_factory.mktemp("tiny-qwen2")
    save_reference_checkpoint("tiny-qwen2", directory)
    return directory


def copy_checkpoint(source, target, edit_config=None, drop=None):
    from safetensors.torch import load_file, save_file

    target.mkdir()
    config = json.loads((source / "config.json").read_text())
    if edit_config:
        config.update(edit_config)
    (target / "config.json").write_text(json.dumps(config))
    tensors = load_file(source / "model.safetensors")
    if drop:
        del tensors[drop]
    save_file(tensors, target / "model.safetensors")
    return target


def test_checkpoint_directory_runs(cli, checkpoint, prompt_file):
    data = generate_json(cli, "--model", checkpoint, "--prompt-ids", prompt_file, "-n", "2")
    assert data["cached_tokens"] == [0, 16, 0]


def broken_models(tmp_path, checkpoint):
    (tmp_path / "empty").mkdir()
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(
        json.dumps({"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2"})
    )
    (tmp_path / "noweights").mkdir()
    (tmp_path / "noweights" / "config.json").write_text((checkpoint / "config.json").read_text())
    return {
        "no such directory": (tmp_path / "missing", "not a model directory nor a preset"),
        "no config.json": (tmp_path / "empty", "no config.json"),
        "unsupported architecture": (tmp_path / "gpt2", "unsupported architecture 'GPT2"),
        "no weight files": (tmp_path / "noweights", "no *.safetensors weight files"),
        "a missing weight": (
            copy_checkpoint(checkpoint, tmp_path / "drop", drop="model.norm.weight"),
            "missing weights model.norm.weight",
        ),
        "mismatched shapes": (
            copy_checkpoint(checkpoint, tmp_path / "shape", {"intermediate_size": 96}),
            "the config says",
        ),
        "too little memory": (
            copy_checkpoint(checkpoint, tmp_path / "huge", {"num_hidden_layers": 10**7}),
            "too little memory for the KV cache",
        ),
    }


CASES = [
    "no such directory",
    "no config.json",
    "unsupported architecture",
    "no weight files",
    "a missing weight",
    "mismatched shapes",
    "too little memory",
]


@pytest.mark.parametrize("case", CASES)
def test_broken_model_is_one_line_exit_2(cli, tmp_path, checkpoint, prompt_file, case):
    directory, message = broken_models(tmp_path, checkpoint)[case]
    result = cli("generate", "--model", directory, "--prompt-ids", prompt_file)
    assert result.exit_code == 2, result.output
    assert message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[[1, 2], [3,", "prompts.json:1:13: invalid JSON"),
        ('{"a": 1}', "expected a non-empty JSON list"),
        ("[[1, -2]]", "prompt 0: token ids must be non-negative integers"),
        ("[[]]", "prompt 0: expected a non-empty list"),
        ("[[1, 9999]]", "prompts.json: prompt 0: token id 9999 is outside the vocabulary of tiny"),
    ],
)
def test_bad_prompt_ids_file(cli, tmp_path, content, message):
    path = tmp_path / "prompts.json"
    path.write_text(content)
    result = cli("generate", "--model", "tiny", "--prompt-ids", path)
    assert result.exit_code == 2, result.output
    assert message in result.stderr, result.stderr


def test_option_errors(cli, prompt_file):
    for args in ([], ["--prompt", "x", "--prompt-ids", str(prompt_file)]):
        result = cli("generate", "--model", "tiny", *args)
        assert result.exit_code == 2 and "exactly one of --prompt" in result.stderr
    result = cli("generate", "--model", "tiny", "--prompt", "x", "--engine", "tpu")
    assert result.exit_code == 2 and "--engine must be cpu or gpu" in result.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present")
def test_gpu_engine_without_cuda_in_a_subprocess(prompt_file):
    completed = run_pcache(
        "generate", "--model", "tiny", "--prompt-ids", prompt_file, "--engine", "gpu"
    )
    assert completed.returncode == 2
    assert completed.stderr.decode().strip() == (
        "pcache: error: --engine gpu needs a CUDA device; none is available"
    )
