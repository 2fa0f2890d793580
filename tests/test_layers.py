"""Imports go one way: DESIGN.md's layers, read from the package's source with ``ast``.

One ordered rank table says which part of the package sits above which. Every import counts —
at module level, inside a function, or for type checking only: each is a dependency a reader must
follow — and a name taken from the ``vidagent`` façade counts as an import of the module that
defines it. A module may import its own part and the parts of lower ranks; parts of one rank
know nothing of each other. On top of the ranks: the front ends' allow-lists, what agents may not
touch although it ranks lower (the Library, pixels, ingest), and no import cycle between modules
except the few named in :data:`CYCLES` with the reason each is kept.

The checks are plain functions over a package folder, so the self-tests run them on a throwaway
package built in a temporary folder.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import networkx as nx

import vidagent

PACKAGE = Path(vidagent.__file__).parent

#: The parts of the package, lowest first. A part is a subpackage or a top-level module (its name
#: without ``.py``); ``vidagent`` is the façade itself. ``_version`` holds ``__version__`` at the
#: bottom, so that no part reads it from the façade above it.
RANKS: tuple[tuple[str, ...], ...] = (
    ("exceptions", "timecode", "roles", "geometry", "_version"),
    ("budget", "trace", "plugins", "prompts", "schemas"),
    ("specs",),
    ("config",),
    ("media",),
    ("models",),
    ("library",),
    ("ingest",),
    ("tools",),
    ("agents",),
    ("bench", "train"),
    ("app",),
    ("server",),
    ("cli",),
    ("vidagent", "__main__"),
)

#: What the front ends may import besides themselves: the application layer and the bottom.
BOTTOM = ("config", "exceptions", "trace", "timecode", "roles", "budget", "_version")
FRONT_ENDS: dict[str, tuple[str, ...]] = {
    "server": ("app", *BOTTOM),
    "cli": ("app", "server", *BOTTOM),  # the CLI starts the servers
}

#: Modules a part must not import although they rank lower: agents read the index and the pixels
#: through tools (``vidagent.tools.index.IndexView``) only; the index's data types and their text
#: views are values, not the store. Tools decode through media's public names only.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "agents": ("vidagent.ingest", "vidagent.media", "vidagent.library", "vidagent.models.vision"),
    "tools": ("vidagent.ingest", "vidagent.media."),  # "x." forbids x's submodules only
    "bench": ("vidagent.ingest", "vidagent.tools"),
}
ALLOWED: dict[str, tuple[str, ...]] = {
    "agents": ("vidagent.library.schema", "vidagent.library.views"),
}

#: Attributes no module of a part may read: an agent keeps the Library it was built over for its
#: callers (``agent.library``) but reads the index through its view and its tools only.
FORBIDDEN_ATTRIBUTES: dict[str, tuple[str, ...]] = {"agents": ("library", "_library")}

#: The import cycles kept, each a set of modules, with the reason.
CYCLES: dict[frozenset[str], str] = {
    frozenset({"vidagent.bench.report", "vidagent.bench.plots"}): (
        "the plots draw report's RunReports (named for type checking) grouped by report's rule; "
        "report imports plots only when asked for plots, since matplotlib is optional"
    ),
}


@dataclass(frozen=True)
class Import:
    """One import of a module: where it is, and the module it resolves to."""

    path: Path
    line: int
    module: str


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def facade_names(root: Path) -> dict[str, str]:
    """The façade's public names -> the module that defines each (``__version__`` ->
    ``vidagent._version``, which the façade re-exports)."""
    tree = ast.parse((root / "__init__.py").read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names |= {a.asname or a.name: node.module for a in node.names}
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "_EXPORTS":
                    exports = ast.literal_eval(node.value)
                    names |= {str(k): str(v) for k, v in exports.items()}
    return names


@cache
def bound_names(package: str, root: Path) -> set[str]:
    """The names a package's ``__init__.py`` imports or assigns (``from vidagent.media import
    probe`` takes the function, not the submodule of that name)."""
    init = root.parent.joinpath(*package.split("."), "__init__.py")
    if not init.is_file():
        return set()
    names = set()
    for node in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module != package and not node.level:
            names |= {a.asname or a.name for a in node.names}  # not its own submodules
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def imports(path: Path, root: Path) -> list[Import]:
    """Every import in a file, relative ones resolved, façade names and submodules looked up."""
    this = module_name(path, root)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    facade = facade_names(root)
    modules = {module_name(p, root) for p in root.rglob("*.py")}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [Import(path, node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if base == root.name and alias.name in facade:
                    target = facade[alias.name]
                elif sub in modules and alias.name not in bound_names(base, root):
                    target = sub
                else:
                    target = base
                found.append(Import(path, node.lineno, target))
    return [i for i in found if i.module == root.name or i.module.startswith(root.name + ".")]


def part(module: str) -> str:
    """The part of the package a module belongs to: ``vidagent.agents.dvd.agent`` -> agents."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def rank(name: str) -> int:
    for n, names in enumerate(RANKS):
        if name in names:
            return n
    raise AssertionError(f"{name} is in no rank of RANKS: give it one")


def _under(module: str, prefix: str) -> bool:
    if prefix.endswith("."):
        return module.startswith(prefix)
    return module == prefix or module.startswith(prefix + ".")


def violations(root: Path) -> list[str]:
    """Every import against the rank table, the front ends' allow-lists or FORBIDDEN."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        here = part(module_name(path, root))
        for i in imports(path, root):
            there = part(i.module)
            where = f"{path.relative_to(root)}:{i.line} imports {i.module}"
            if here == there:
                continue
            if here in FRONT_ENDS and there not in FRONT_ENDS[here]:
                wrong.append(f"{where} (a front end imports the application layer only)")
            elif rank(there) >= rank(here):
                wrong.append(f"{where} ({there} does not rank below {here})")
            elif any(_under(i.module, f) for f in FORBIDDEN.get(here, ())) and not any(
                _under(i.module, a) for a in ALLOWED.get(here, ())
            ):
                wrong.append(f"{where} ({here} must not import it)")
        for attr in FORBIDDEN_ATTRIBUTES.get(here, ()):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            wrong += [
                f"{path.relative_to(root)}:{n.lineno} reads .{attr}"
                for n in ast.walk(tree)
                if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.ctx, ast.Load)
            ]
    return wrong


def cycles(root: Path) -> list[set[str]]:
    """The sets of modules that import each other, round a cycle, and are not in CYCLES."""
    graph: nx.DiGraph[str] = nx.DiGraph()
    for path in root.rglob("*.py"):
        this = module_name(path, root)
        graph.add_node(this)
        graph.add_edges_from((this, i.module) for i in imports(path, root) if i.module != this)
    knots = [c for c in nx.strongly_connected_components(graph) if len(c) > 1]
    return [k for k in knots if frozenset(k) not in CYCLES]


def test_every_import_goes_down_the_rank_table() -> None:
    assert violations(PACKAGE) == []


def test_no_import_cycle_but_the_named_ones() -> None:
    assert cycles(PACKAGE) == []


def test_every_part_of_the_package_has_a_rank() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__"}
    packages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    for name in modules | packages | {"vidagent"}:
        rank(name)


#: A throwaway façade's first line: the version re-exported from the bottom, as the real one does.
VERSIONED = "from vidagent._version import __version__\n"


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A throwaway ``vidagent`` package in ``tmp_path`` with ``files`` (path -> source)."""
    root = tmp_path / "vidagent"
    facade = {"__init__.py": VERSIONED, "_version.py": '__version__ = "0"\n'}
    for name, source in {**facade, **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(root).parents:
            (root / parent / "__init__.py").touch()
        path.write_text(source, encoding="utf-8")
    return root


def test_the_checker_finds_an_import_up_the_ranks(tmp_path: Path) -> None:
    root = _package(tmp_path, {"media/decode.py": "from vidagent.agents.base import Agent\n"})
    (found,) = violations(root)
    assert "media/decode.py:1 imports vidagent.agents.base" in found


def test_the_checker_finds_a_lazy_or_type_only_import_and_a_facade_name(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "__init__.py": VERSIONED + '_EXPORTS = {"Session": "vidagent.app"}\n',
            "config.py": "def f():\n    from vidagent.models.registry import x\n",
            "library/store.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from vidagent import Session\n",
            "models/registry.py": "from vidagent import __version__\n",
        },
    )
    found = violations(root)
    assert len(found) == 2
    assert any("config.py:2 imports vidagent.models.registry" in f for f in found)
    assert any("library/store.py:3 imports vidagent.app" in f for f in found)


def test_the_checker_holds_front_ends_and_agents_to_their_lists(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "server/routes.py": "from vidagent.ingest.pipeline import index_path\n"
            "from vidagent.app import Session\n",
            "agents/dvd/agent.py": "from vidagent.library.store import Library\n"
            "from vidagent.library.schema import ClipRow\n"
            "def f(self):\n    return self.library.clips()\n",
        },
    )
    found = violations(root)
    assert len(found) == 3
    assert any("server/routes.py:1" in f and "front end" in f for f in found)
    assert any("agents/dvd/agent.py:1" in f and "must not import" in f for f in found)
    assert any("agents/dvd/agent.py:4 reads .library" in f for f in found)


def test_the_checker_finds_a_cycle_inside_a_package(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "library/store.py": "from vidagent.library.vectors import V\n",
            "library/vectors.py": "def f():\n    from vidagent.library.store import Library\n",
        },
    )
    assert cycles(root) == [{"vidagent.library.store", "vidagent.library.vectors"}]
