"""No import cycles among pcache's modules, lazy imports (inside functions) included; the
graph is `bench/import_graph.py`'s (`python bench/import_graph.py` prints it)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "import_graph.py"
_spec = importlib.util.spec_from_file_location("import_graph", BENCH)
assert _spec is not None and _spec.loader is not None
import_graph = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_graph)
_metrics = importlib.util.spec_from_file_location(
    "house_metrics", BENCH.parent / "house_metrics.py"
)
assert _metrics is not None and _metrics.loader is not None
house_metrics = importlib.util.module_from_spec(_metrics)
_metrics.loader.exec_module(house_metrics)


def test_the_graph_sees_lazy_and_relative_imports(tmp_path):
    package = tmp_path / "pcache"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pcache.sub import b\n")
    (package / "sub" / "__init__.py").write_text("from . import b\n")
    (package / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pcache.a\n"
        "from ..a import f\n"
    )
    graph = import_graph.import_graph(tmp_path)
    assert graph == {
        "pcache": set(),
        "pcache.a": {"pcache.sub.b"},
        "pcache.sub": {"pcache.sub.b"},
        "pcache.sub.b": {"pcache.a"},
    }
    assert import_graph.cycles(graph) == [["pcache.a", "pcache.sub.b", "pcache.a"]]


def test_no_import_cycles():
    graph = import_graph.import_graph()
    assert len(graph) > 100 and "pcache.cache.block_pool" in graph
    found = import_graph.cycles(graph)
    assert not found, "import cycles:\n" + import_graph.describe(found)


def test_folders_import_only_downwards():
    """Between folders (`pcache.X` for every module under `pcache/X/`, a root module its own
    node) imports go one way, lazy imports included: no folder imports one that imports it."""
    graph = import_graph.import_graph()
    found = house_metrics.folder_cycles(graph)
    folder = house_metrics.folder_of
    edges = [
        f"{module} -> {name}"
        for module, imported in sorted(graph.items())
        for name in sorted(imported)
        if any((folder(module), folder(name)) in itertools.pairwise(circle) for circle in found)
    ]
    assert not found, f"folder circles {found}, by the imports:\n" + "\n".join(edges)


def test_ray_is_imported_by_its_executor_only_and_only_when_made():
    """`pcache[ray]` is optional: one module imports Ray, inside a function, so `import
    pcache`, `--help` and every local run work without it."""
    import ast

    root = BENCH.parent.parent / "pcache"
    importers = {}
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            else:
                continue
            if any(module.split(".")[0] == "ray" for module in modules):
                importers.setdefault(str(path.relative_to(root)), []).append(id(node) in top_level)
    assert importers == {"executors/ray_tasks.py": [False]}
