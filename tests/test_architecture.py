"""The architecture holds: the import-linter contracts of pyproject.toml (layers import
downward only; only ridgeline.io turns files into models, devices, hosts and profiles), and
no import cycle among the project's modules, imports inside functions counted."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ridgeline", "kernels", "viewer")


def project_modules() -> dict[str, Path]:
    """Every module of the project by dotted name (a package by its own name)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imported_names(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every dotted name an import statement anywhere in the module (functions included)
    names: ``import a.b`` -> a.b; ``from a import b`` -> a.b (the module b, else a's name b:
    ``import_graph`` maps it to its longest known module, as import-linter does); relative
    ones resolved."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join([*parent, base] if base else parent)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (the longest known prefix of each name)."""
    modules = project_modules()
    graph = {}
    for module, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        targets = set()
        for name in imported_names(tree, module, path.name == "__init__.py"):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
        graph[module] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import():
    tree = ast.parse("def f():\n    from b import g\n")
    assert imported_names(tree, "a", False) == {"b.g"}
    graph = {"a": {"b"}, "b": {"a"}, "c": {"a"}}
    assert cycles(graph) == [["a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_resolve_to_their_package():
    tree = ast.parse("from . import ids\nfrom .state import x\n")
    assert imported_names(tree, "viewer.layout", False) == {"viewer.ids", "viewer.state.x"}


@pytest.mark.slow
def test_no_import_cycles_among_the_project_modules():
    graph = import_graph()
    assert len(graph) > 70 and "ridgeline.io.resolve" in graph["ridgeline.api"]
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


@pytest.mark.slow
def test_nothing_below_the_cli_imports_it_and_it_imports_nothing_above():
    """kernels and viewer add their commands through entry points: they import the CLI, the
    CLI imports neither (no arrow runs up the house)."""
    graph = import_graph()
    cli = {m for m in graph if m == "ridgeline.cli" or m.startswith("ridgeline.cli.")}
    importers = {m for m, targets in graph.items() if targets & cli} - cli
    assert "ridgeline.cli.app" in graph["ridgeline.cli"]
    assert importers == {"ridgeline.__main__", "kernels.cli", "viewer.cli"}
    upward = {(m, t) for m in graph if m.startswith("ridgeline") for t in graph[m] if t.split(".")[0] != "ridgeline"}
    assert not {(m, t) for m, t in upward if t.split(".")[0] in ("kernels", "viewer")}


def test_the_plugins_the_cli_loads_are_declared_and_register_their_commands():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    assert declared["ridgeline.commands"] == {"kernels": "kernels.cli:register", "viewer": "viewer.cli:register"}
    assert declared["ridgeline.writers"] == {"html": "viewer.entry:write_html"}
    from ridgeline.cli import load_all

    app = load_all()
    names = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    assert {"e2e", "decode-profile", "simulate-check", "calibrate", "validate", "serve"} <= names
    assert "predictions" in {g.name for g in app.registered_groups}


def test_the_import_contracts_are_kept():
    pytest.importorskip("importlinter")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = "from importlinter.cli import lint_imports_command; lint_imports_command()"
    done = subprocess.run(
        [sys.executable, "-c", command, "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "Contracts: 4 kept, 0 broken." in done.stdout


def command_bodies() -> dict[str, int]:
    """Each CLI command function (decorated by a call: app.command, command(...)) and the
    lines of its body, the docstring left out."""
    out = {}
    for path in sorted((ROOT / "ridgeline" / "cli").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(isinstance(d, ast.Call) for d in node.decorator_list):
                body = node.body[1:] if ast.get_docstring(node) else node.body
                out[node.name] = body[-1].end_lineno - body[0].lineno + 1 if body else 0
    return out


def test_the_facade_and_the_rendering_stay_thin():
    """Issue 56: api.py and each module of ridgeline/report/ under 500 lines (the computing
    lives in the engine and serving/)."""
    files = [ROOT / "ridgeline" / "api.py", *sorted((ROOT / "ridgeline" / "report").glob("*.py"))]
    assert {f.name: n for f in files if (n := len(f.read_text().splitlines())) >= 500} == {}


def test_no_command_body_is_over_12_lines():
    bodies = command_bodies()
    assert {"analyze", "simulate", "plan", "frontier"} <= set(bodies)
    assert {name: n for name, n in bodies.items() if n > 12} == {}


def test_the_top_level_is_the_agreed_one():
    """pyproject.toml, README.md, the eight folders and .ci/ (the pip constraints live in
    .ci/, the speed benchmarks under tests/benchmarks/): nothing else is tracked there."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False).stdout.split()
    if not listed:
        pytest.skip("not a git checkout")
    top = {path.split("/")[0] for path in listed}
    folders = {"ridgeline", "hardware", "models", "kernels", "viewer", "reports", "tests", "docs", ".ci"}
    assert top == {"pyproject.toml", "README.md", ".gitignore", *folders}


# what a command reads, counted in a fresh process: every file opened for reading by path
READS = """
import collections, json, sys
from pathlib import Path
opened = collections.Counter()
plain = Path.open
def counted(self, mode="r", *args, **kw):
    if "r" in mode and self.suffix in (".yaml", ".json", ".csv"):
        opened[self.resolve().relative_to(Path.cwd().resolve()).as_posix()] += 1
    return plain(self, mode, *args, **kw)
Path.open = counted
from typer.testing import CliRunner
from ridgeline.cli import app
result = CliRunner().invoke(app, sys.argv[1:])
print(json.dumps([result.exit_code, opened]))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "command, inputs",
    [
        (
            [
                "analyze",
                "llama-3-8b",
                "-H",
                "h200",
                "--dtype",
                "fp8",
                "--profile",
                "reports/profiles/cuda-nvidia-h200.yaml",
            ],
            {"models/catalog/llama-3-8b.json", "hardware/h200.yaml", "reports/profiles/cuda-nvidia-h200.yaml"},
        ),
        (
            ["simulate", "llama-3-8b", "-H", "h100-sxm", "--rate", "2", "--requests", "20"],
            {"models/catalog/llama-3-8b.json", "hardware/h100-sxm.yaml", "reports/intervals/spec-residuals.json"},
        ),
        (["compare", "llama-2-7b", "-H", "a6000,h100-sxm,a6000"], {"hardware/a6000.yaml", "hardware/h100-sxm.yaml"}),
    ],
    ids=lambda c: c[0] if isinstance(c, list) else "",
)
def test_each_input_file_is_read_once_per_command(command, inputs):
    """Issue 56: a command reads each file it needs once (a profile was read twice; a device
    again when its interval pool named it), however many places use it."""
    done = subprocess.run(
        [sys.executable, "-c", READS, *command], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    code, opened = json.loads(done.stdout.splitlines()[-1])
    assert code == 0 and inputs <= set(opened), (done.stderr[-2000:], opened)
    assert {path: n for path, n in opened.items() if n > 1} == {}
