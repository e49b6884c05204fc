"""The library's layout (docs/architecture.md): `bril/` holds one folder per stage, each
importing only the stages below it (function-local imports included), no folder holds
more than 16 modules, and the import graph has no circle."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Bottom to top.  (`bril.passes` is the top-level passes/ folder, `bril.cli` cli/;
# `bril.warm_start` is a stage of one module, what a warm run reads.)
STAGES = ["warm_start", "ir", "analysis", "cache", "native_runtime", "interpreter", "passes", "tracing",
          "backend", "tools", "cli"]
FOLDERS = {"passes": ROOT / "passes", "cli": ROOT / "cli"}
MODULE_STAGES = {"warm_start"}
FOLDERS.update({s: ROOT / "bril" / s for s in STAGES
                if s not in FOLDERS and s not in MODULE_STAGES})
# The documented pass API's old paths: aliases of the real modules (nothing else).
ALIASES = {"cfg": "analysis", "dataflow": "analysis", "dominance": "analysis", "ops": "ir",
           "rules": "ir", "interp": "interpreter"}


def _modules():
    """{dotted name: path} of every module of the library."""
    out = {f"bril.{stage}": ROOT / "bril" / f"{stage}.py" for stage in MODULE_STAGES}
    for stage, folder in FOLDERS.items():
        for path in folder.glob("*.py"):
            name = f"bril.{stage}" + ("" if path.stem == "__init__" else f".{path.stem}")
            out[name] = path
    return out


def _imports(name, path):
    """The library modules `name` imports, anywhere in its file."""
    package = name if path.stem == "__init__" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _stage(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "bril" \
        and (parts[1] in FOLDERS or parts[1] in MODULE_STAGES) else None


def test_each_stage_imports_only_the_stages_below_it():
    modules = _modules()
    assert len(modules) > 60
    wrong = []
    for name, path in modules.items():
        mine = STAGES.index(_stage(name))
        for target in _imports(name, path):
            if target.startswith("bril.") and target.split(".")[1] in ALIASES:
                wrong.append(f"{name} imports {target} through its old path")
            stage = _stage(target)
            if stage is not None and STAGES.index(stage) > mine:
                wrong.append(f"{name} ({_stage(name)}) imports {target} ({stage})")
    assert not wrong, "\n".join(sorted(wrong))


def test_no_folder_holds_more_than_16_modules():
    for stage, folder in FOLDERS.items():
        assert len([p for p in folder.glob("*.py") if p.stem != "__init__"]) <= 16, stage
    top = [p.stem for p in (ROOT / "bril").glob("*.py") if p.stem != "__init__"]
    assert sorted(top) == sorted([*ALIASES, *MODULE_STAGES])


def test_the_old_paths_are_the_real_modules():
    for old, stage in ALIASES.items():
        text = (ROOT / "bril" / f"{old}.py").read_text()
        assert f"from .{stage} import {old} as _real" in text
        assert "sys.modules[__name__] = _real" in text


def test_the_import_graph_has_no_circle():
    modules = _modules()
    graph = {name: {t for t in _imports(name, path) if t in modules and t != name}
             for name, path in modules.items()}
    # (iterative depth-first search: colour 1 on the stack, 2 done)
    colour = {}
    for start in graph:
        if colour.get(start):
            continue
        stack = [(start, iter(sorted(graph[start])))]
        colour[start] = 1
        path = [start]
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
                continue
            if colour.get(nxt) == 1:
                raise AssertionError("import circle: " + " -> ".join(
                    path[path.index(nxt):] + [nxt]))
            if not colour.get(nxt):
                colour[nxt] = 1
                stack.append((nxt, iter(sorted(graph[nxt]))))
                path.append(nxt)
