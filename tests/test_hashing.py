"""Chained block hashes: vLLM byte compatibility and the properties every chain must have."""

from __future__ import annotations

import hashlib
import json
import pickle

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pcache.cache.hashing import (
    HASH_ALGOS,
    HashSettings,
    block_hashes,
    vllm_extra_keys,
    vllm_none_hash,
)

# vllm_prefix_cache.md §5: list(range(40)), block size 16
WORKED = {
    ("sha256_cbor", None): (
        "dc918a88b139e5afe60b88eda27508d4aee16c10fdc354791efea06206ac0749",
        "c300ec275d7bf08af8fc63e76cdc0086911bbc7091e03c5cf892553bef84ef0c",
    ),
    ("sha256_cbor", "0"): (
        "d830de3d42c00f25a2949b5d12d98642664a44872c1614c5b0147556276afc9c",
        "fedd9e4abebebbe6f6cf96b682f08d316063fe2f22a5c552192dd62904fcccac",
    ),
    ("sha256", None): (
        "fe8fa5dda3210d0ca2031e37cbe3b001186773cd1c710beb2d45fcb51d434798",
        "8be7aaa33831156d316f1f463ae57e643deb63f42e633e2d631df88815cc4629",
    ),
}


@pytest.fixture
def no_seed(monkeypatch):
    monkeypatch.delenv("PYTHONHASHSEED", raising=False)


@pytest.mark.parametrize(("algo", "seed"), list(WORKED))
def test_worked_example(monkeypatch, algo, seed):
    if seed is None:
        monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    else:
        monkeypatch.setenv("PYTHONHASHSEED", seed)
    hashes = block_hashes(list(range(40)), HashSettings(algo=algo, block_size=16))
    assert tuple(h.hex() for h in hashes) == WORKED[(algo, seed)]


def test_none_hash_matches_the_spec(no_seed):
    expected = "9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0"
    assert vllm_none_hash("sha256_cbor").hex() == expected
    assert vllm_none_hash("sha256_cbor") == hashlib.sha256(cbor2.dumps("vllm-none-hash")).digest()


def test_cli_prints_the_worked_example(cli, tmp_path, no_seed):
    request = tmp_path / "ids.json"
    request.write_text(json.dumps({"token_ids": list(range(40))}))
    result = cli(
        "hash", request, "--hash-algo", "sha256_cbor", "-t", "o200k_base", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    assert record["num_tokens"] == 40
    assert record["block_size"] == 16
    assert record["hash_algo"] == "sha256_cbor"
    assert record["block_hashes"] == list(WORKED[("sha256_cbor", None)])
    text = cli("hash", request, "--hash-algo", "sha256_cbor", "-t", "o200k_base")
    assert all(h in text.stdout for h in WORKED[("sha256_cbor", None)])


def reference_chain(tokens, algo, size, salt=None, lora=None):
    """The straightforward vLLM computation: serialize the 3-tuple per block, then hash."""
    dump = (
        (lambda v: cbor2.dumps(v, canonical=True))
        if algo.endswith("cbor")
        else (lambda v: pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL))
    )
    parent = hashlib.sha256(dump("vllm-none-hash")).digest()
    out = []
    for index in range(len(tokens) // size):
        block = tuple(tokens[index * size : (index + 1) * size])
        parent = hashlib.sha256(dump((parent, block, vllm_extra_keys(index, salt, lora)))).digest()
        out.append(parent)
    return out


token_lists = st.lists(
    st.one_of(
        st.integers(0, 30),
        st.integers(0, 300),
        st.integers(0, 70_000),
        st.integers(0, 2**32 - 1),
    ),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(
    tokens=token_lists,
    algo=st.sampled_from(["sha256", "sha256_cbor"]),
    size=st.sampled_from([1, 3, 4, 16, 24, 30]),
    salt=st.one_of(st.none(), st.text(max_size=5)),
    lora=st.one_of(st.none(), st.tuples(st.text(max_size=4), st.text(max_size=4))),
)
def test_fast_chain_equals_the_straightforward_one(tokens, algo, size, salt, lora):
    fast = block_hashes(
        tokens, HashSettings(algo=algo, block_size=size, cache_salt=salt, lora=lora)
    )
    assert fast == reference_chain(tokens, algo, size, salt, lora)


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 200_000), min_size=1, max_size=70),
    extra=st.lists(st.integers(0, 200_000), max_size=40),
    algo=st.sampled_from(HASH_ALGOS),
    size=st.sampled_from([1, 4, 16]),
)
def test_chain_is_prefix_stable(tokens, extra, algo, size):
    chosen = HashSettings(algo=algo, block_size=size)
    short = block_hashes(tokens, chosen)
    long = block_hashes(tokens + extra, chosen)
    assert long[: len(short)] == short
    assert len(short) == len(tokens) // size


@settings(max_examples=80, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 200_000), min_size=1, max_size=80),
    data=st.data(),
    algo=st.sampled_from(["pcache", "sha256", "sha256_cbor"]),
    size=st.sampled_from([1, 4, 16]),
)
def test_one_changed_token_changes_exactly_the_later_blocks(tokens, data, algo, size):
    position = data.draw(st.integers(0, len(tokens) - 1))
    changed = list(tokens)
    changed[position] = tokens[position] + 1
    chosen = HashSettings(algo=algo, block_size=size)
    before, after = block_hashes(tokens, chosen), block_hashes(changed, chosen)
    first = position // size
    assert before[:first] == after[:first]
    assert all(x != y for x, y in zip(before[first:], after[first:], strict=True))


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 1000), min_size=16, max_size=64),
    salts=st.lists(st.text(min_size=1, max_size=6), min_size=2, max_size=2, unique=True),
    algo=st.sampled_from(["pcache", "sha256", "sha256_cbor"]),
)
def test_different_salts_share_no_hash(tokens, salts, algo):
    first = block_hashes(tokens, HashSettings(algo=algo, block_size=4, cache_salt=salts[0]))
    second = block_hashes(tokens, HashSettings(algo=algo, block_size=4, cache_salt=salts[1]))
    unsalted = block_hashes(tokens, HashSettings(algo=algo, block_size=4))
    assert not set(first) & set(second)
    assert not set(first) & set(unsalted)


def test_pcache_namespace_separates_models_and_templates():
    tokens = list(range(64))
    base = HashSettings(renderer="gpt-oss", template_digest="t1", block_size=16)
    variants = [
        HashSettings(renderer="qwen3", template_digest="t1", block_size=16),
        HashSettings(renderer="gpt-oss", template_digest="t2", block_size=16),
        HashSettings(renderer="gpt-oss", template_digest="t1", block_size=16, cache_salt=""),
        HashSettings(renderer="gpt-oss", template_digest="t1", block_size=16, lora=("a", "b")),
    ]
    reference = set(block_hashes(tokens, base))
    for variant in variants:
        assert not reference & set(block_hashes(tokens, variant))


def test_pcache_encoding_is_length_prefixed():
    # ("ab","c") vs ("a","bc") style ambiguity: the namespace fields are length-prefixed
    one = HashSettings(renderer="ab", template_digest="c").initial_hash()
    two = HashSettings(renderer="a", template_digest="bc").initial_hash()
    assert one != two


def test_continuing_a_chain_equals_hashing_at_once(no_seed):
    tokens = list(range(100))
    for algo in ("pcache", "sha256", "sha256_cbor"):
        chosen = HashSettings(algo=algo, block_size=16, cache_salt="s")
        whole = block_hashes(tokens, chosen)
        head = block_hashes(tokens[:32], chosen)
        tail = block_hashes(tokens[32:], chosen, parent=head[-1], start_block=2)
        assert head + tail == whole


def test_xxhash_family_with_a_fixed_seed(monkeypatch):
    xxhash = pytest.importorskip("xxhash")
    monkeypatch.setenv("PYTHONHASHSEED", "12345")
    hashes = block_hashes(list(range(20)), HashSettings(algo="xxhash_cbor", block_size=16))
    none_hash = xxhash.xxh3_128_digest(cbor2.dumps("12345"))
    expected = xxhash.xxh3_128_digest(cbor2.dumps((none_hash, tuple(range(16)), None)))
    assert hashes == [expected]


# vllm_prefix_cache.md §3, the hashing scenarios (U1, U9, U11, U12, U15)


def test_u1_none_hash_seed(monkeypatch):
    from pcache.cache.hashing import vllm_none_hash_seed

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    for algo in ("sha256", "sha256_cbor"):
        assert vllm_none_hash_seed(algo) == "vllm-none-hash"
        assert vllm_none_hash(algo) == vllm_none_hash(algo)  # stable across re-initialisation
    random_seed = vllm_none_hash_seed("xxhash")
    assert random_seed != "vllm-none-hash" and len(random_seed) == 64
    monkeypatch.setenv("PYTHONHASHSEED", "python hash seed")
    assert (
        vllm_none_hash("sha256")
        == hashlib.sha256(
            pickle.dumps("python hash seed", protocol=pickle.HIGHEST_PROTOCOL)
        ).digest()
    )
    monkeypatch.setenv("PYTHONHASHSEED", "12345")
    assert vllm_none_hash_seed("xxhash_cbor") == "12345"


def test_u9_u11_tagged_extra_keys():
    assert vllm_extra_keys(0, "salt", None) == (("cache_salt", "salt"),)
    assert vllm_extra_keys(1, "salt", None) is None
    assert vllm_extra_keys(3, None, None) is None
    lora = ("test_lora_adapter", "/path/to/lora")
    for index in (0, 1, 7):
        keys = vllm_extra_keys(index, None, lora)
        assert keys == (("lora", "test_lora_adapter", "/path/to/lora"),)
    assert vllm_extra_keys(0, "s", lora) == (
        ("lora", "test_lora_adapter", "/path/to/lora"),
        ("cache_salt", "s"),
    )


def test_u12_u15_block_hash_is_the_hash_of_the_3_tuple(no_seed):
    none_hash = vllm_none_hash("sha256")

    def fn(value):
        return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()

    h0, h1 = block_hashes(list(range(6)), HashSettings(algo="sha256", block_size=3))
    assert h0 == fn((none_hash, (0, 1, 2), None))
    assert h1 == fn((h0, (3, 4, 5), None))
