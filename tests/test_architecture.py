"""The library's imports point one way (docs/architecture.md).

Every ``import`` of every module under ``neurosym/`` and ``cli/`` is read with
:mod:`ast` (those inside functions too) and checked against the layer table below: a
module may import from its own layer or a lower one, never from a higher one, and the
module graph has no cycle. An import inside a function is allowed only for a heavy
subsystem loaded lazily on purpose, marked by a ``# lazy`` comment on its line or the
line above.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

REPO = Path(__file__).resolve().parents[1]

# (module prefix, layer): the longest matching prefix decides. Lower layers know nothing
# of higher ones.
LAYERS: list[tuple[str, int]] = [
    ("neurosym.errors", 0),
    ("neurosym.vocab", 0),
    ("neurosym.semiring", 0),
    ("neurosym.fuzzy", 0),
    ("neurosym.version", 0),
    ("neurosym.files", 0),
    ("neurosym.dsl", 1),
    ("neurosym.compile", 2),
    ("neurosym.kinds", 3),
    ("neurosym.report", 3),
    ("neurosym.layers", 4),
    ("neurosym.data", 4),
    ("neurosym.tasks", 4),  # the structured suite's tasks (issue 20)
    ("neurosym.lm", 5),
    ("neurosym.decode", 6),
    ("neurosym.hf", 6),  # the Hugging Face bridge (optional extra `hf`)
    ("neurosym.hf_idea", 6),  # idea gating on a transformers LM (optional extra `hf`)
    ("neurosym.experiments", 6),
    ("neurosym.synth", 6),
    ("neurosym.bench", 6),
    ("neurosym.cli", 7),
    ("neurosym", 8),  # the package's front door (neurosym/__init__.py) may import any layer
]
LAYER_NAMES = {0: "base", 1: "dsl", 2: "compile", 3: "kinds/report", 4: "layers/data", 5: "lm",
               6: "decode/hf/experiments/synth/bench", 7: "cli", 8: "front door"}


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for the library and the CLI (installed as neurosym.cli)."""
    out: dict[str, Path] = {}
    for base, prefix in ((REPO / "neurosym", "neurosym"), (REPO / "cli", "neurosym.cli")):
        for f in sorted(base.rglob("*.py")):
            parts = list(f.relative_to(base).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([prefix, *parts])] = f
    return out


def layer_of(module: str) -> int:
    # the front door is the package's __init__ only; every other module is listed by prefix
    best = max((p for p, _ in LAYERS if module == p or (p != "neurosym" and module.startswith(p + "."))), key=len, default=None)
    if best is None:
        raise AssertionError(f"{module}: not in tests/test_architecture.py's layer table; add it there")
    return dict(LAYERS)[best]


def imports_of(module: str, path: Path, known: set[str]) -> list[tuple[str, int, bool, str]]:
    """``(imported module, line, inside a function, source line)`` for every neurosym import."""
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - (child.level - 1)]
                    src = ".".join(base + ([child.module] if child.module else []))
                else:
                    src = child.module or ""
                # `from pkg import sub` imports the submodule when there is one
                targets = [f"{src}.{a.name}" if f"{src}.{a.name}" in known else src for a in child.names]
            for t in dict.fromkeys(targets):
                if t == "cli" or t.startswith("cli."):
                    t = "neurosym." + t
                if t == "neurosym" or t.startswith("neurosym."):
                    ln = child.lineno
                    context = " ".join(lines[max(0, ln - 2) : ln])
                    out.append((t, ln, in_function, context))
            visit(child, inner)

    visit(tree, False)
    return out


FILES = module_files()
KNOWN = set(FILES)


def _all_imports():
    for module, path in FILES.items():
        for target, line, inner, context in imports_of(module, path, KNOWN):
            yield module, path, target, line, inner, context


def test_every_module_has_a_layer():
    for module in FILES:
        layer_of(module)


def test_imports_point_down():
    bad = []
    for module, path, target, line, _inner, _ctx in _all_imports():
        src, dst = layer_of(module), layer_of(target)
        if dst > src:
            bad.append(f"{path.relative_to(REPO)}:{line}: {module} ({LAYER_NAMES[src]}) imports {target} ({LAYER_NAMES[dst]})")
    assert not bad, "imports that point up:\n" + "\n".join(bad)


def test_no_import_cycles():
    g = nx.DiGraph()
    for module, _path, target, _line, _inner, _ctx in _all_imports():
        # a package's __init__ importing its own submodules is how packages re-export
        if target != module and not target.startswith(module + "."):
            owner = target
            while owner not in KNOWN and "." in owner:
                owner = owner.rpartition(".")[0]
            g.add_edge(module, owner)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + [c[0]]) for c in cycles[:20])


def test_function_level_imports_are_marked_lazy():
    bad = [
        f"{path.relative_to(REPO)}:{line}: {target}"
        for module, path, target, line, inner, context in _all_imports()
        if inner and "# lazy" not in context
    ]
    assert not bad, "imports inside functions without a `# lazy` reason:\n" + "\n".join(bad)


def test_no_private_names_cross_modules():
    bad = []
    for module, path in FILES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name.startswith("_") and not a.name.startswith("__"):
                        bad.append(f"{path.relative_to(REPO)}:{node.lineno}: from {node.module} import {a.name}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)
