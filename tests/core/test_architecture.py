"""The one rule of imports (docs/architecture.md): a layer of ``oloproof_core`` imports only the
layers below it, no modules import each other in a circle, and a plugin imports ``oloproof``,
never ``oloproof_core``. Every import counts, those inside functions and under TYPE_CHECKING too:
an import deferred for speed is still a dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# bottom to top; a module of a layer may import its own layer and the layers before it
LAYERS = ("model", "statistics", "results", "hooks", "config", "storage", "decisions", "engine", "workflows",
          "outputs", "cli", "viewer")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, name: str) -> set[str]:
    """Every module ``path`` imports, absolute, relative ones resolved (``from a import b`` names
    ``a.b`` when that is a module, else ``a``: the caller checks against the modules it knows)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def graph(root: Path, tops: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the modules of ``tops`` it imports (packages under ``root``)."""
    files = {module_name(p, root): p for top in tops
             for p in ([root / top] if top.endswith(".py") else (root / top).rglob("*.py"))}
    edges = {}
    for name, path in files.items():
        edges[name] = {m for m in imports_of(path, name) if m in files and m != name}
    return edges


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "oloproof_core" or len(parts) < 2:
        return None  # the package itself
    if parts[1] not in LAYERS:
        raise AssertionError(f"{module} is in no layer: put it in one of {', '.join(LAYERS)} "
                             "(docs/architecture.md), or add its layer to LAYERS and the docs")
    return LAYERS.index(parts[1])


def upward_imports(edges: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(edges.items()):
        low = layer_of(module)
        for target in sorted(targets):
            high = layer_of(target)
            if low is not None and high is not None and high > low:
                problems.append(f"{module} ({LAYERS[low]}) imports {target} ({LAYERS[high]}), a layer above it")
    return problems


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_each_layer_imports_only_the_layers_below_it():
    assert upward_imports(graph(ROOT, ("oloproof_core",))) == []


def test_no_modules_import_each_other_in_a_circle():
    assert circles(graph(ROOT, ("oloproof_core",))) == []
    assert circles(graph(ROOT / "plugins", tuple(p.name for p in (ROOT / "plugins").iterdir() if p.is_dir()))) == []
    benchmarks = ROOT / "benchmarks"  # scripts importing each other by file name (``from run import ...``)
    assert circles(graph(benchmarks, tuple(p.name for p in benchmarks.glob("*.py")))) == []


def test_plugins_import_the_public_api_only():
    """The builtin plugins, and the third-party packages the tests install (their tests too)."""
    wrong = []
    for root in (ROOT / "plugins", ROOT / "tests" / "third_party", ROOT / "examples"):
        for path in sorted(root.rglob("*.py")):
            name = module_name(path, root)
            wrong += [f"{path.relative_to(ROOT)} imports {m}" for m in sorted(imports_of(path, name))
                      if m.split(".")[0] == "oloproof_core"]
    assert wrong == []


def test_every_module_of_the_core_is_in_a_layer_and_none_is_long():
    long = []
    for path in sorted((ROOT / "oloproof_core").rglob("*.py")):
        layer_of(module_name(path, ROOT))  # raises for a module outside the layers
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > 420:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert long == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return tmp_path


@pytest.mark.parametrize("statement", ["from oloproof_core.engine.runner import run_suite",
                                       "from ..engine import runner",
                                       "import oloproof_core.engine.runner"])
def test_a_planted_upward_import_is_found(tmp_path, statement):
    """The check can fail: the data model importing the engine, at module level or in a function."""
    root = _tree(tmp_path, {"oloproof_core/__init__.py": "", "oloproof_core/model/__init__.py": "",
                            "oloproof_core/model/records.py": f"def f():\n    {statement}\n",
                            "oloproof_core/engine/__init__.py": "", "oloproof_core/engine/runner.py": "x = 1\n"})
    assert ("oloproof_core.model.records (model) imports oloproof_core.engine.runner (engine), a layer above it"
            in upward_imports(graph(root, ("oloproof_core",))))


def test_a_planted_circle_is_found(tmp_path):
    root = _tree(tmp_path, {"oloproof_core/__init__.py": "", "oloproof_core/engine/__init__.py": "",
                            "oloproof_core/engine/suite.py": "from .execution import Executions\n",
                            "oloproof_core/engine/execution.py": "def f():\n    from .suite import Suite\n"})
    assert circles(graph(root, ("oloproof_core",))) == [["oloproof_core.engine.execution", "oloproof_core.engine.suite"]]
