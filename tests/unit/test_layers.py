"""The package's imports form layers: no cycle, nothing imports upward, the runtime never imports
the dev tools, no function-local import of the package hides a cycle, and no runtime module outside
formats/ and testing/ is over 600 lines.

Read from the source with ``ast``, so an import inside a function counts like one at the top, and
importing ``a.b.c`` also counts as importing the packages ``a`` and ``a.b`` (their ``__init__`` runs), but
for the importer's own packages, which ran before it.
"""

from __future__ import annotations

import ast
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "pipelines"

#: Bottom → top. A module may import its own layer or lower ones. Patterns are fnmatch globs.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "pipelines",
            "pipelines.errors",
            "pipelines.formats",
            "pipelines.formats.*",
            "pipelines.values",
            "pipelines.values.*",
            "pipelines.spark_schema",
            "pipelines.layout",
            "pipelines.sql",
            "pipelines.names",
        ),
    ),
    (
        "storage",
        (
            "pipelines.warehouse",
            "pipelines.mirror_columns",
            "pipelines.mirror_key",
            "pipelines.lock",
            "pipelines.run_requests",
            "pipelines.delta_writes",
            "pipelines.delta_dml",
            "pipelines.connect_relay",
            "pipelines.spark",
            "pipelines.spark_logs",
            "pipelines.kafka_offsets",
        ),
    ),
    ("rules", ("pipelines.quality", "pipelines.quality.rules")),
    ("config", ("pipelines.config", "pipelines.config.*", "pipelines.selection", "pipelines.routing")),
    (
        "stages",
        (
            "pipelines.quality.*",
            "pipelines.bronze",
            "pipelines.silver",
            "pipelines.silver_counts",
            "pipelines.mirror_names",
            "pipelines.preflight",
        ),
    ),
    ("gold", ("pipelines.gold", "pipelines.gold.*")),
    (
        "orchestration",
        (
            "pipelines.one_query",
            "pipelines.runner",
            "pipelines.export",
            "pipelines.status",
            "pipelines.progress",
            "pipelines.quarantine",
            "pipelines.serving",
            "pipelines.why",
            "pipelines.erase",
            "pipelines.consistent",
            "pipelines.status_mirrors",
            "pipelines.metrics",
        ),  # fmt: skip
    ),
    ("entry points", ("pipelines.cli", "pipelines.cli_commands", "pipelines.cli_commands.*")),
)
#: Dev tools: they may import the runtime; only the CLI's dev subcommands import them.
DEV_TOOLS = ("pipelines.testing", "pipelines.testing.*")
DEV_TOOL_IMPORTERS = ("pipelines.cli_commands.dev",)
#: Modules allowed a function-local import of the package: the CLI loads a subcommand's code only
#: when that subcommand runs (``lakecdc --help`` stays quick, and the wheel has no dev tools).
LAZY_IMPORTERS = (
    "pipelines.cli",
    "pipelines.cli_commands.shared",
    "pipelines.cli_commands.pipeline",
    "pipelines.cli_commands.formats",
    "pipelines.cli_commands.dq",
    "pipelines.cli_commands.dev",
    "pipelines.cli_commands.maintain",
    "pipelines.cli_commands.quarantine",
    "pipelines.cli_commands.lineage",
    "pipelines.cli_commands.metrics",
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    is_package = MODULES[module].name == "__init__.py"
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(module: str) -> list[tuple[str, bool]]:
    """(imported module of the package, whether the import is inside a function or class)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue  # type hints only: never executed
            targets: list[str] = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(module, child)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in child.names]
            for target in targets:
                parts = target.split(".")
                for i in range(1, len(parts) + 1):  # a.b.c runs a/__init__ and a/b/__init__ too
                    name = ".".join(parts[:i])
                    if i < len(parts) and module.startswith(f"{name}."):
                        continue  # the importer's own package ran before it: a sibling's import runs nothing more
                    if name in MODULES and name not in (module, PACKAGE):
                        found.append((name, nested))
            visit(child, inner)

    visit(tree, False)
    return found


def layer_of(module: str) -> int | None:
    for rank, (_, patterns) in enumerate(LAYERS):  # the first (most specific) match
        if any(fnmatch(module, p) for p in patterns):
            return rank
    return None


def is_dev(module: str) -> bool:
    return any(fnmatch(module, p) for p in DEV_TOOLS)


GRAPH = {m: sorted({t for t, _ in imports_of(m)}) for m in MODULES}


def test_every_runtime_module_has_a_layer():
    assert [m for m in MODULES if not is_dev(m) and layer_of(m) is None] == []


def test_nothing_imports_upward():
    upward = []
    for module, targets in GRAPH.items():
        if is_dev(module):
            continue
        for target in targets:
            if is_dev(target):
                continue  # checked below
            if layer_of(target) > layer_of(module):
                upward.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
                )
    assert upward == []


def test_runtime_never_imports_dev_tools():
    offenders = [
        f"{m} imports {t}"
        for m, ts in GRAPH.items()
        for t in ts
        if is_dev(t) and not is_dev(m) and m not in DEV_TOOL_IMPORTERS
    ]
    assert offenders == []


def test_no_function_local_import_of_the_package():
    hidden = [
        f"{m} imports {t} inside a function"
        for m in MODULES
        if m not in LAZY_IMPORTERS
        for t, nested in imports_of(m)
        if nested
    ]
    assert hidden == []


def test_no_import_cycle():
    """Tarjan's strongly connected components over the whole package, dev tools included."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH.get(v, ()):
            if w not in index:
                connect(w)
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
                cycles.append(sorted(component))

    for module in GRAPH:
        if module not in index:
            connect(module)
    assert cycles == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_module_size_or_a_stated_reason(module):
    """About 400 lines at most, unless the module's docstring says why it is longer."""
    path = MODULES[module]
    lines = path.read_text(encoding="utf-8").count("\n")
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    assert lines <= 420 or "longer than" in doc.lower(), f"{module}: {lines} lines and no stated reason"


#: A hard bound, whatever a docstring says: no runtime module outside these (which keep their sizes) is longer.
MAX_RUNTIME_LINES = 600
SIZE_EXEMPT = ("pipelines.formats", "pipelines.formats.*", "pipelines.testing", "pipelines.testing.*")


def test_no_runtime_module_is_over_600_lines():
    over = [
        f"{module}: {lines} lines"
        for module, path in MODULES.items()
        if not any(fnmatch(module, p) for p in SIZE_EXEMPT)
        and (lines := path.read_text(encoding="utf-8").count("\n")) > MAX_RUNTIME_LINES
    ]
    assert over == [], f"split these at a seam a reader would name (at most {MAX_RUNTIME_LINES} lines)"


def test_the_checker_sees_a_hidden_cycle(tmp_path, monkeypatch):
    """The cycle finder and the function-local rule catch what they claim to (a cycle through a lazy import)."""
    GRAPH_BACKUP = dict(GRAPH)
    try:
        GRAPH["pipelines.sql"] = [*GRAPH["pipelines.sql"], "pipelines.gold.stage"]
        with pytest.raises(AssertionError):
            test_no_import_cycle()
        with pytest.raises(AssertionError):
            test_nothing_imports_upward()
    finally:
        GRAPH.clear()
        GRAPH.update(GRAPH_BACKUP)


def test_a_submodule_counts_its_own_package_only_when_it_names_it(tmp_path, monkeypatch):
    """Importing a sibling (``pipelines.p.b`` from ``pipelines.p.a``) runs no ``__init__`` that had not run
    before ``a`` itself, so it is no edge to ``pipelines.p``; naming the package (``from pipelines.p
    import y``) is one, so a package that re-exports such a module is still seen in a cycle."""
    files = {
        "pipelines.p": ("__init__.py", "from pipelines.p.a import y\nfrom pipelines.p.c import z\n"),
        "pipelines.p.a": ("a.py", "from pipelines.p.b import x\n\ny = x\n"),
        "pipelines.p.b": ("b.py", "x = 1\n"),
        "pipelines.p.c": ("c.py", "from pipelines.p import y\n\nz = y\n"),
    }
    for name, (file, text) in files.items():
        (tmp_path / file).write_text(text)
        monkeypatch.setitem(MODULES, name, tmp_path / file)
    assert imports_of("pipelines.p.a") == [("pipelines.p.b", False)]
    assert imports_of("pipelines.p.c") == [("pipelines.p", False)]
    assert imports_of("pipelines.p") == [("pipelines.p.a", False), ("pipelines.p.c", False)]


def test_public_runtime_functions_have_type_hints():
    """Every public function and method of the runtime says what it takes and returns."""
    missing = []
    for module, path in MODULES.items():
        if is_dev(module):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            functions = [node]
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                functions = [n for n in node.body if isinstance(n, ast.FunctionDef)]
            for fn in functions:
                if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
                    continue
                args = [a for a in fn.args.args + fn.args.kwonlyargs if a.arg not in ("self", "cls")]
                if any(a.annotation is None for a in args) or fn.returns is None:
                    missing.append(f"{module}.{fn.name}")
    assert missing == []


def private_uses(module: str) -> list[str]:
    """The ``_name``s of other modules of the package that ``module`` uses: ``from pipelines.x import _y``
    (a private module itself, such as ``formats._canal_family``, is no private name), or ``x._y`` on a
    module of the package that ``module`` imported as a name (``from pipelines import x``, ``import
    pipelines.x as x``)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    found: list[str] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module, node)
            if base != PACKAGE and not base.startswith(f"{PACKAGE}."):
                continue
            for alias in node.names:
                if f"{base}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                elif alias.name.startswith("_") and not alias.name.startswith("__") and base != module:
                    found.append(f"{module}:{node.lineno} imports {alias.name} from {base}")
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and aliases.get(node.value.id, module) != module
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{module}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return found


def test_no_module_uses_another_modules_private_names():
    """A ``_name`` is its module's own: a name another module uses is public (no leading underscore)."""
    assert [use for module in MODULES for use in private_uses(module)] == []


def test_the_checker_sees_a_private_name(tmp_path, monkeypatch):
    files = {
        "pipelines.p": ("__init__.py", ""),
        "pipelines.p.a": ("a.py", "def _x():\n    pass\n\n\ny = _x\n"),
        "pipelines.p.b": ("b.py", "from pipelines.p.a import _x, y\n"),
        "pipelines.p.c": ("c.py", "from pipelines.p import a\n\nz = a._x\n"),
        "pipelines.p.d": ("d.py", "from pipelines.p import _e\nfrom pipelines.p.a import y\n"),
        "pipelines.p._e": ("_e.py", "def f():\n    pass\n"),
    }
    for name, (file, text) in files.items():
        (tmp_path / file).write_text(text)
        monkeypatch.setitem(MODULES, name, tmp_path / file)
    assert private_uses("pipelines.p.a") == []
    assert private_uses("pipelines.p.b") == ["pipelines.p.b:1 imports _x from pipelines.p.a"]
    assert private_uses("pipelines.p.c") == ["pipelines.p.c:3 uses pipelines.p.a._x"]
    assert private_uses("pipelines.p.d") == []
