"""The house's shape (docs/architecture.md): no import circle, no function over 80 lines, one small model record,
families found by their presence."""

import ast
import pkgutil
from dataclasses import fields
from pathlib import Path

import vrambudget
from vrambudget import families
from vrambudget.model.arch import ModelArch

PKG = Path(vrambudget.__file__).parent


def modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        name = ".".join(p.relative_to(PKG.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def imports(mods: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        package = m.split(".") if p.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = package[: len(package) - node.level + 1] if node.level else []
                mod = ".".join(base + ([node.module] if node.module else []))
                for a in node.names:
                    target = f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod
                    if target in mods and target != m:
                        graph[m].add(target)
            elif isinstance(node, ast.Import):
                graph[m].update(a.name for a in node.names if a.name in mods and a.name != m)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert cycles(imports(modules())) == []


def test_no_function_over_80_lines():
    long = []
    for m, p in modules().items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 80:
                long.append(f"{m}.{node.name}: {node.end_lineno - node.lineno + 1} lines")
    assert long == []


def test_the_model_record_is_small_and_every_scalar_comes_from_its_layers():
    assert len(fields(ModelArch)) <= 16


def test_a_family_is_one_file_found_by_its_presence():
    found = {f.name for f in families.families()}
    defined = set()
    for m in pkgutil.iter_modules(families.__path__):
        text = (Path(families.__file__).parent / f"{m.name}.py").read_text()
        if "\nFAMILY = Family(" in text:
            defined.add(m.name)
    assert len(found) == len(defined) >= 11
    assert "FAMILIES" not in (Path(families.__file__)).read_text().split("def families")[0]  # no list to edit


# docs/architecture.md's layers, top to bottom: a module imports from its own line and the lines below
LAYERS = [["cli", "commands", "api"], ["probe"], ["output"], ["comparison", "fit", "fastest"], ["parallel"],
          ["prediction"], ["serving", "start_checks"], ["budget", "runtime", "activation", "graphs", "features"], ["coefficients", "logparse"],
          ["deployment"], ["kv.planner"], ["model.checkpoint", "model.drafter", "model.lora"], ["families"],
          ["model.weights", "model.allocator", "model.config_check"], ["model.arch"], ["layers", "towers"], ["kv.spec", "kv"],
          ["hardware", "vllm_rules"], ["inputs", "profiles", "units", "errors", "model", ""]]


def layer_of(module: str) -> int:
    best = (-1, -1)
    for i, row in enumerate(LAYERS):
        for p in row:
            full = f"vrambudget.{p}" if p else "vrambudget"
            if (module == full or module.startswith(full + ".")) and len(full) > best[1]:
                best = (i, len(full))
    assert best[0] >= 0, f"{module} is on no line of docs/architecture.md"
    return best[0]


def test_every_import_goes_down_the_drawn_layers():
    upward = sorted((m, t) for m, ts in imports(modules()).items() for t in ts
                    if m != "vrambudget" and layer_of(t) < layer_of(m))  # the package's __init__ exposes the API
    assert upward == []
