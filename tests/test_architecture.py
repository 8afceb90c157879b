"""The library's imports point one way (docs/architecture.md).

Every ``import`` of every module under ``neurosym/`` and ``cli/`` is read with
:mod:`ast` (those inside functions too) and checked against the layer table of
docs/architecture.md, which this test parses (the document is the only copy): a module
may import from its own layer and from the layers its row may import (transitively),
never from any other, and the module graph has no cycle. An import inside a function is
allowed only for a heavy subsystem loaded lazily on purpose, marked by a ``# lazy``
comment on its line or the line above. No module reads a private name of another module,
nor of a third-party package outside that package's adapter module (the document's
second table).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import networkx as nx
import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
LAYER_HEADING = "## The layers, and the rule that keeps them apart"
BACKTICKED = re.compile(r"`([^`]+)`")


def markdown_tables(text: str, heading: str) -> list[list[list[str]]]:
    """The tables under ``heading`` (up to the next ``## `` heading), each as rows of
    cells, the header and the ``---`` line dropped."""
    if heading not in text:
        raise AssertionError(f"docs/architecture.md has no section {heading!r}")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    tables: list[list[list[str]]] = []
    current: list[list[str]] | None = None
    for line in section.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if current is None:
                current = []  # the header row
                tables.append(current)
            elif not all(set(c) <= set("-: ") for c in cells):
                current.append(cells)
        else:
            current = None
    return tables


def module_of_path(path: str) -> str:
    """A path of the table (``dsl/``, ``kinds.py``, ``__init__.py``) -> a module prefix."""
    if not re.fullmatch(r"[a-z_]+(/[a-z_]+)*(/|\.py)", path):
        raise AssertionError(f"docs/architecture.md: {path!r} is not a path under neurosym/ (`x/`, `x.py`, `x/y.py`)")
    name = (path[:-1] if path.endswith("/") else path[:-3]).replace("/", ".")
    return "neurosym" if name == "__init__" else f"neurosym.{name}"


def backticked_list(cell: str, where: str) -> list[str]:
    """The comma-separated backticked items of a cell; anything else in it is an error."""
    items = BACKTICKED.findall(cell)
    if not items or BACKTICKED.sub("", cell).replace(",", "").strip():
        raise AssertionError(f"docs/architecture.md, {where}: expected a comma-separated list of `paths`, got {cell!r}")
    return items


def read_layer_table(text: str) -> tuple[list[tuple[str, str]], dict[str, set[str]], list[str]]:
    """``(prefixes, allowed, order)``: (module prefix, layer) pairs; for each layer the
    layers it may import (its own and, transitively, those its row names); the layers
    bottom first."""
    tables = markdown_tables(text, LAYER_HEADING)
    if not tables or any(len(r) != 3 for r in tables[0]):
        raise AssertionError("docs/architecture.md: the layer table needs three columns (layer | modules | may import)")
    prefixes: list[tuple[str, str]] = []
    allowed: dict[str, set[str]] = {}
    order: list[str] = []
    for name, modules, may_import in tables[0]:
        if name in allowed:
            raise AssertionError(f"docs/architecture.md: layer {name!r} has two rows")
        below = [] if may_import in ("—", "-", "") else [x.strip() for x in may_import.split(",")]
        for b in below:
            if b not in allowed:
                raise AssertionError(f"docs/architecture.md: layer {name!r} may import {b!r}, which is not a row listed before it")
        allowed[name] = {name}.union(*(allowed[b] for b in below))
        order.append(name)
        for path in backticked_list(modules, f"layer {name!r}"):
            prefix = module_of_path(path)
            if prefix in dict(prefixes):
                raise AssertionError(f"docs/architecture.md: {path} is in two layers")
            prefixes.append((prefix, name))
    return prefixes, allowed, order


def read_adapters(text: str) -> dict[str, str]:
    """Third-party package -> the one module allowed to read its private names."""
    tables = markdown_tables(text, LAYER_HEADING)
    if len(tables) < 2 or any(len(r) != 2 for r in tables[1]):
        raise AssertionError("docs/architecture.md: the adapter table needs two columns (third-party package | its adapter module)")
    out = {}
    for package, module in tables[1]:
        [pkg] = backticked_list(package, "adapter table")
        [path] = backticked_list(module, "adapter table")
        out[pkg] = module_of_path(path)
    return out


DOC_TEXT = DOC.read_text()
LAYERS, ALLOWED, ORDER = read_layer_table(DOC_TEXT)
ADAPTERS = read_adapters(DOC_TEXT)


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


def layer_of(module: str) -> str:
    # the front door is the package's __init__ only; every other module is listed by prefix
    best = max((p for p, _ in LAYERS if module == p or (p != "neurosym" and module.startswith(p + "."))), key=len, default=None)
    if best is None:
        raise AssertionError(f"{module}: in no layer of docs/architecture.md's layer table; add it there")
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


def forbidden(module: str, target: str) -> str | None:
    """Why the layer table forbids ``module`` to import ``target``, or None when it allows it."""
    src, dst = layer_of(module), layer_of(target)
    if dst in ALLOWED[src]:
        return None
    return f"{module} ({src}) imports {target} ({dst}); {src} may import {', '.join(x for x in ORDER if x in ALLOWED[src])}"


def test_forbidden_follows_the_table():
    assert forbidden("neurosym.experiments.control", "neurosym.decode.mask") is None
    assert forbidden("neurosym.bench.synth", "neurosym.synth.clock") is None
    assert forbidden("neurosym.hf_idea", "neurosym.hf") is None
    assert "synth may import" in forbidden("neurosym.synth.beam", "neurosym.decode.mask")  # synthesis needs no decoding
    assert forbidden("neurosym.decode.run", "neurosym.experiments.control") is not None
    assert forbidden("neurosym.hf", "neurosym.hf_idea") is not None
    assert forbidden("neurosym.lm.fusion", "neurosym.kinds") is not None
    assert forbidden("neurosym.compile.regex", "neurosym.cli.main") is not None


def test_imports_point_down():
    bad = [
        f"{path.relative_to(REPO)}:{line}: {why}"
        for module, path, target, line, _inner, _ctx in _all_imports()
        if (why := forbidden(module, target))
    ]
    assert not bad, "imports the layer table of docs/architecture.md forbids:\n" + "\n".join(bad)


def test_layer_table_names_only_real_modules():
    # a stale row would let a forbidden import through once its name is reused
    for prefix, layer in LAYERS:
        assert any(m == prefix or m.startswith(prefix + ".") for m in FILES), f"docs/architecture.md, layer {layer}: {prefix} does not exist"


def test_layer_table_reader_rejects_what_it_cannot_enforce():
    head = LAYER_HEADING + "\n\n| layer | modules | may import |\n| --- | --- | --- |\n"
    prefixes, allowed, order = read_layer_table(head + "| base | `errors.py` | — |\n| dsl | `dsl/` | base |\n| top | `__init__.py` | dsl |\n")
    assert prefixes == [("neurosym.errors", "base"), ("neurosym.dsl", "dsl"), ("neurosym", "top")]
    assert allowed == {"base": {"base"}, "dsl": {"dsl", "base"}, "top": {"top", "dsl", "base"}} and order == ["base", "dsl", "top"]
    bad = {
        "| a | `dsl/` | b |\n| b | `errors.py` | — |\n": "not a row listed before it",  # an arrow up, or a cycle
        "| a | `dsl/` | — |\n| b | `dsl/`, `files.py` | a |\n": "in two layers",
        "| a | dsl/ | — |\n": "comma-separated list",
        "| a | `neurosym/dsl` | — |\n": "not a path under neurosym/",
        "| a | `dsl/` |\n": "three columns",
    }
    for rows, message in bad.items():
        with pytest.raises(AssertionError, match=message):
            read_layer_table(head + rows)


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


def is_private(name: str) -> bool:
    """``_x`` and ``__x`` are private; ``__x__`` is not."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def third_party(dotted: str) -> str | None:
    """The top-level package of an absolute import when it is neither neurosym nor the
    standard library."""
    top = dotted.split(".")[0]
    return None if not top or top in ("neurosym", "cli") or top in sys.stdlib_module_names else top


def private_uses(source: str, own_package: str | None = None) -> list[tuple[int, str, str | None]]:
    """``(line, what, third-party package or None)`` for every private name a module
    reaches across a module boundary: ``from x import _y`` (any absolute module), and of
    a third-party package ``import pkg._m``, ``from pkg._m import y``, ``pkg._x`` and
    ``getattr(pkg, "_x")``, down attribute, call and subscript chains from a name the
    module imported (``pkg.f()._x``, ``mod.Cls._x``). Uses of ``own_package`` (the
    package whose adapter this module is) are left out."""
    tree = ast.parse(source)
    bound: dict[str, str] = {}  # a name the module imported -> its third-party package
    out: list[tuple[int, str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                pkg = third_party(a.name)
                if pkg:
                    bound[a.asname or a.name.split(".")[0]] = pkg
                    if any(is_private(part) for part in a.name.split(".")):
                        out.append((node.lineno, f"import {a.name}", pkg))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            pkg = third_party(node.module)
            if pkg and any(is_private(part) for part in node.module.split(".")):
                out.append((node.lineno, f"from {node.module} import ...", pkg))
            for a in node.names:
                if is_private(a.name):
                    out.append((node.lineno, f"from {node.module} import {a.name}", pkg))
                if pkg:
                    bound[a.asname or a.name] = pkg

    def root(node: ast.AST) -> str | None:
        while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return bound.get(node.id) if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            pkg = root(node.value)
            if pkg:
                out.append((node.lineno, f"{ast.unparse(node)}", pkg))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr", "setattr", "delattr")
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and is_private(node.args[1].value)):
            pkg = root(node.args[0])
            if pkg:
                out.append((node.lineno, f"{ast.unparse(node)}", pkg))
    return sorted((line, what, pkg) for line, what, pkg in out if pkg is None or pkg != own_package)


def test_private_use_finder():
    src = """
import interegular
import interegular.patterns as ip
from interegular import patterns as ire
from interegular._impl import x
from interegular.patterns import _CharGroup, Pattern
from neurosym.x import _helper
import os, numpy as np
def f(node):
    a = isinstance(node, ire._Concatenation) and node is ip._DOT
    b = interegular.parse_pattern("a")._cache
    c = getattr(ire, "_EMPTY", None), getattr(ire, "Pattern"), Pattern._fields[0]._y
    d = os._exit, np.__version__, node._private, ire.REFlags.I, np.linalg._umath_linalg
"""
    found = [(line, what) for line, what, _pkg in private_uses(src)]
    assert found == [
        (5, "from interegular._impl import ..."),
        (6, "from interegular.patterns import _CharGroup"),
        (7, "from neurosym.x import _helper"),
        (10, "ip._DOT"),
        (10, "ire._Concatenation"),
        (11, "interegular.parse_pattern('a')._cache"),
        (12, "Pattern._fields"),
        (12, "Pattern._fields[0]._y"),
        (12, "getattr(ire, '_EMPTY', None)"),
        (13, "np.linalg._umath_linalg"),
    ]
    # the adapter of interegular may use interegular's private names, and nothing else's
    assert [what for _line, what, _pkg in private_uses(src, own_package="interegular")] == [
        "from neurosym.x import _helper", "np.linalg._umath_linalg",
    ]


def test_adapters_exist_and_use_their_package():
    for pkg, module in ADAPTERS.items():
        assert module in FILES, f"docs/architecture.md: the adapter of {pkg}, {module}, does not exist"
        assert any(p == pkg for _line, _what, p in private_uses(FILES[module].read_text())), (
            f"{module} uses no private name of {pkg}; drop it from docs/architecture.md's adapter table"
        )


def test_no_private_names_cross_modules():
    adapter_of = {module: pkg for pkg, module in ADAPTERS.items()}
    bad = [
        f"{path.relative_to(REPO)}:{line}: {what}" + (f" (a private name of {pkg}: only its adapter module may use it)" if pkg else "")
        for module, path in FILES.items()
        for line, what, pkg in private_uses(path.read_text(), adapter_of.get(module))
    ]
    assert not bad, "private names used across modules:\n" + "\n".join(bad)
