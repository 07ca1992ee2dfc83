"""The dependencies: a small core, extras for the rest, `dev` made of the other extras (but
Ray's)."""

from __future__ import annotations

import ast
import re

from tests.conftest import ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
EXTRAS = PROJECT["optional-dependencies"]


def names(requirements: list[str]) -> set[str]:
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requirements}


def test_transformers_is_a_test_dependency_only():
    assert "transformers" not in names(PROJECT["dependencies"])
    assert "transformers" in names(EXTRAS["test"])


def test_pcache_never_imports_transformers():
    for path in (ROOT / "pcache").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                modules = [node.value] if node.value.startswith("transformers.") else []
            else:
                continue
            assert not any(m.split(".")[0] == "transformers" for m in modules), path


def test_dev_is_made_of_the_other_extras():
    """All but `ray` (about 80 MB), which .ci/run installs on its own, best effort."""
    (own,) = [r for r in EXTRAS["dev"] if r.startswith("pcache[")]
    referenced = set(own.removeprefix("pcache[").removesuffix("]").split(","))
    assert referenced == set(EXTRAS) - {"dev", "ray"}
    assert '-e ".[ray]"' in (ROOT / ".ci" / "run").read_text()
    copied = names(EXTRAS["dev"]) & set().union(*(names(EXTRAS[e]) for e in referenced))
    assert copied == {"pcache"}  # only the self-reference, no requirement of another extra


def test_triton_only_in_the_gpu_extra():
    holders = [extra for extra, requirements in EXTRAS.items() if "triton" in names(requirements)]
    assert holders == ["gpu"] and "triton" not in names(PROJECT["dependencies"])
    assert "torch" in names(EXTRAS["engine"])  # the CPU engine needs no triton


def test_the_version_is_the_published_one():
    import pcache
    from pcache.version import __version__

    assert __version__ == PROJECT["version"] == pcache.__version__
