"""The house's rules, read from the package's own source (docs/ARCHITECTURE.md, "The house").

Every import counts: at module level, inside functions, and under ``TYPE_CHECKING``.  Importing a module
also runs its package's ``__init__``, so each package's ``__init__`` counts as imported too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "agentmsg"
#: The layers, lowest first: a module may import its own layer and those below it (docs/ARCHITECTURE.md).
LOWER = ("domain", "backends")
UPPER = ("service", "runtime", "hosts", "hooks", "cli", "mcp", "resident")
#: Every part of the package, top floor first: a module imports only its own floor and the floors below it
#: (docs/ARCHITECTURE.md's picture).  The core modules sit at the bottom.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("__main__", "cli", "mcp"),
    ("resident",),
    ("hooks",),
    ("service",),
    ("runtime",),
    ("hosts",),
    ("backends",),
    ("ports", "text", "domain"),
    ("paths", "pathops", "fsio", "records", "errors", ""),
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every agentmsg module ``name`` imports, wherever the import statement stands."""
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = name.split(".") if is_pkg else name.split(".")[:-1]
            if node.level:
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in MODULES else mod for a in node.names]
        for target in targets:
            if not target.startswith("agentmsg"):
                continue
            parts = target.split(".")
            for i in range(1, len(parts) + 1):  # the module and every package __init__ on its way
                prefix = ".".join(parts[:i])
                if prefix in MODULES and prefix != name:
                    out.add(prefix)
    return out


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def test_no_import_cycle() -> None:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


@pytest.mark.parametrize("layer", LOWER)
def test_the_lower_layers_import_nothing_above_them(layer: str) -> None:
    upward = {(m, t) for m, targets in GRAPH.items() if m.startswith(f"agentmsg.{layer}")
              for t in targets if any(t.startswith(f"agentmsg.{up}") for up in UPPER)}
    assert upward == set()


def _floor(module: str) -> int:
    part = module.split(".")[1] if "." in module else ""
    return next(i for i, floor in enumerate(FLOORS) if part in floor)


def test_no_import_runs_back_up() -> None:
    """No upward arrows: every import goes to the module's own floor or below it."""
    upward = sorted((m, t) for m, targets in GRAPH.items() for t in targets if _floor(t) < _floor(m))
    assert upward == []


def test_every_part_of_the_package_has_a_floor() -> None:
    parts = {m.split(".")[1] if "." in m else "" for m in MODULES}
    assert parts <= {p for floor in FLOORS for p in floor}, parts - {p for floor in FLOORS for p in floor}


def test_the_domain_imports_only_the_core() -> None:
    allowed = ("agentmsg", "agentmsg.domain", "agentmsg.errors", "agentmsg.records")
    outside = {(m, t) for m, targets in GRAPH.items() if m.startswith("agentmsg.domain")
               for t in targets if not (t in allowed or t.startswith("agentmsg.domain."))}
    assert outside == set()


def test_at_most_six_modules_sit_at_the_top() -> None:
    top = sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert len(top) <= 6, top


def test_package_inits_import_nothing_of_their_own() -> None:
    """A package's ``__init__`` runs whenever any of its modules is imported: it must not import them back."""
    heavy = {m: sorted(GRAPH[m]) for m, p in MODULES.items() if p.name == "__init__.py" and GRAPH[m]}
    assert heavy == {}


def _host_words() -> dict[str, list[str]]:
    """Each host's pin runtime and session variables, from the hosts' own modules (as they declare them)."""
    from agentmsg.hosts import registry

    words = {}
    for host in registry.all_hosts():
        if host.name == "human":
            continue  # a domain concept (``Pin.human``), not a host program
        words[host.name] = [host.runtime] + [v for v in (host.shell_var, host.hook_var) if v]
    return words


def _literals(path: Path) -> list[str]:
    """The strings a module's code holds (docstrings left out: prose may name a host)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


@pytest.mark.parametrize("host", sorted(_host_words()))
def test_outside_hosts_at_most_two_modules_name_a_host(host: str) -> None:
    """A host's runtime name or session variable, in a string outside ``hosts/``: at most two modules (the
    runtimes a pin may name, in ``domain.validate``; the CLI's per-host commands)."""
    pattern = re.compile("|".join(rf"\b{re.escape(w)}\b" for w in _host_words()[host]), re.IGNORECASE)
    naming = sorted(m for m, p in MODULES.items() if not m.startswith("agentmsg.hosts")
                    and any(pattern.search(s) for s in _literals(p)))
    assert len(naming) <= 2, naming


def test_one_module_starts_background_processes() -> None:
    starts = re.compile(r"\b(Popen|posix_spawn|os\.fork|start_new_session|setsid)\b")
    found = sorted(m for m, p in MODULES.items() if starts.search(p.read_text()))
    assert found == ["agentmsg.runtime.spawn"]


def test_the_layout_has_one_owner_and_the_docs_tree_is_generated_from_it() -> None:
    """docs/ARCHITECTURE.md's tree is layout.FILES rendered; each kind says its role, writer and reader."""
    import importlib.util

    from agentmsg.backends.file import layout

    spec = importlib.util.spec_from_file_location("gen_layout", PACKAGE.parent / "scripts" / "gen_layout.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.stale() == [], "stale: python scripts/gen_layout.py --write"
    run = gen.RUN.read_text()
    code = "\n".join(line.split(" # ")[0] for line in run[run.index(gen.RUN_MARKS[1]):].splitlines()
                     if not line.lstrip().startswith("#"))  # below its generated block, comments left out
    for value in gen.SH_NAMES.values():  # hooks/run spells no file name of its own
        word = re.escape(value)
        pattern = rf"{word}\b" if value.startswith(".") else rf"(/{word}\b|\b{word}/)"
        assert not re.search(pattern, code), value
    roles = {role for _path, role, *_ in layout.FILES}
    assert roles <= {"truth", "derived", "local", "lock", "transient", "log"}
    truth = sorted(path.rsplit("/", 1)[-1] for path, role, *_ in layout.FILES if role == "truth")
    assert truth == ["<alias>.jsonl", "<alias>.jsonl", "collab.jsonl", "delivery.jsonl", "log.jsonl", "outbox.jsonl"]
    assert all(writer and reader and what for _p, _r, writer, reader, what in layout.FILES)
