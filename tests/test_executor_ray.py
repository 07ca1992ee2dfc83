"""`--executor ray` on a real 2-CPU local Ray cluster (started once for the module): lint, the
report and `replay --simulate` (one pool, and four replicas) print byte for byte what the local
run prints, and the work did run as Ray tasks. Skipped where Ray is not installed."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.executor_logs import request_log
from tests.fixtures import hf_model_dir

ray = pytest.importorskip("ray")

MOONCAKE = ROOT / "tests" / "data" / "mooncake" / "conversation_head.jsonl"


@pytest.fixture(scope="module", autouse=True)
def cluster():
    ray.init(
        address="local",  # a cluster of its own, even where one runs already
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}},
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    return request_log(tmp_path_factory.mktemp("ray") / "log.jsonl", requests=400)


@pytest.fixture(autouse=True)
def small_shards(monkeypatch):
    monkeypatch.setenv("PCACHE_SHARD_BYTES", "20000")  # the test log is cut into several


def local_and_ray(cli, *args):
    from pcache.executors.ray_tasks import RayExecutor

    local = cli(*args)
    before = RayExecutor.submitted
    remote = cli(*args, "--executor", "ray")
    assert remote.exit_code == local.exit_code, remote.output
    assert local.exit_code in (0, 1), local.output
    return local.stdout, remote.stdout, RayExecutor.submitted - before


def test_lint_on_ray_is_lint(cli, log):
    args = ("lint", log, "-t", hf_model_dir("llama3.1"), "--format", "json", "--exit-zero")
    local, remote, tasks = local_and_ray(cli, *args)
    assert remote == local and '"findings"' in local
    assert tasks > 3


def test_report_on_ray_is_the_local_report(cli, log):
    args = ("report", log, "-t", hf_model_dir("llama3.1"), "--format", "json", "-o", "-")
    local, remote, tasks = local_and_ray(cli, *args)
    assert remote == local and '"lint"' in local
    assert tasks > 3


@pytest.mark.parametrize("tokenizer", ["gpt-oss", "llama3.1"])
def test_replay_simulate_on_ray_is_the_local_replay(cli, log, tokenizer):
    name = tokenizer if tokenizer == "gpt-oss" else hf_model_dir(tokenizer)
    args = ("replay", log, "--simulate", "-t", name, "--cache-blocks", "600", "--format", "json")
    local, remote, tasks = local_and_ray(cli, *args)
    assert remote == local and '"hit_tokens"' in local
    assert tasks > 3


@pytest.mark.parametrize("router", ["round-robin", "sglang", "precise"])
def test_four_replicas_on_ray_are_the_local_fleet(cli, log, router):
    args = ("replay", log, "--replicas", "4", "--router", router, "--format", "json")
    local, remote, tasks = local_and_ray(cli, *args, "--cache-blocks", "300")
    assert remote == local and '"replicas"' in local
    shards = tasks - (0 if router == "precise" else 4)  # precise routes from the pools
    assert shards > 3


def test_four_replicas_of_a_hash_id_trace_on_ray(cli):
    args = ("replay", MOONCAKE, "--replicas", "1,4", "--router", "round-robin,session")
    local, remote, tasks = local_and_ray(cli, *args, "--format", "json")
    assert remote == local and '"sweep"' in local
    assert tasks == 2 * (1 + 4)


def test_a_timed_fleet_on_ray_runs_in_one_pass(cli):
    trace = SAMPLES / "traces" / "shared_prefix_hash_ids.jsonl"
    args = ("replay", trace, "--replicas", "4", "--concurrency", "timed", "--format", "json")
    local, remote, tasks = local_and_ray(cli, *args)
    assert remote == local and tasks == 0
