"""The package's public surface: ``vidagent.__all__`` is what ``vidagent`` exports, and
``vidagent --help`` stays light (no NumPy, LanceDB or torch)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import vidagent

#: Names ``vidagent/__init__.py`` binds to build its lazy exports; not part of the surface.
IMPLEMENTATION = {"annotations", "import_module", "TYPE_CHECKING", "Any"}


def _bound_at_top_level(tree: ast.Module) -> set[str]:
    """Names the module binds outside ``if TYPE_CHECKING:`` (assignments, defs, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _type_checking_imports(tree: ast.Module) -> set[str]:
    """Names imported under ``if TYPE_CHECKING:`` (what type checkers see of the exports)."""
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            return {
                a.asname or a.name
                for stmt in node.body
                if isinstance(stmt, ast.ImportFrom)
                for a in stmt.names
            }
    return set()


def test_every_name_in_all_resolves_and_comes_from_where_it_says() -> None:
    assert len(set(vidagent.__all__)) == len(vidagent.__all__), "a name is listed twice"
    for name in vidagent.__all__:
        value = getattr(vidagent, name)  # the lazy __getattr__ or a module global
        assert not isinstance(value, ModuleType), f"{name} is a module, not an export"
        if name in vidagent._EXPORTS:
            home = vidagent._EXPORTS[name]
            assert value is getattr(sys.modules[home], name), f"{name} is not {home}.{name}"


def test_all_lists_exactly_what_the_package_exports() -> None:
    tree = ast.parse(Path(vidagent.__file__).read_text())
    lazy = set(vidagent._EXPORTS)
    defined = {n for n in _bound_at_top_level(tree) if not n.startswith("_")} - IMPLEMENTATION
    # Public: the lazy names, the public names bound in __init__.py, and __version__.
    assert set(vidagent.__all__) == lazy | defined | {"__version__"}
    # Type checkers see the same names as the lazy loader serves.
    assert _type_checking_imports(tree) == lazy
    # What the module holds at run time: nothing public beyond __all__, submodules (bound as
    # attributes once imported) and the loader's own imports.
    public = {
        name
        for name, value in vars(vidagent).items()
        if not name.startswith("_") and not isinstance(value, ModuleType)
    }
    assert public - IMPLEMENTATION <= set(vidagent.__all__)
    for name in sorted(IMPLEMENTATION):
        assert name not in vidagent.__all__


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        vidagent.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no attribute 'no_such_name'" in str(e)
    else:
        raise AssertionError("vidagent.no_such_name resolved")


def test_help_imports_no_numpy_lancedb_or_torch() -> None:
    # A fresh interpreter: what an import costs can only be seen before anything is imported.
    code = (
        "import contextlib, io, json, sys\n"
        "from vidagent.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        "    code = main(['--help'])\n"
        "print(json.dumps({'code': code, 'help': out.getvalue(), 'modules': sorted(sys.modules)}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["code"] == 0 and "Usage: vidagent" in result["help"]
    assert "index" in result["help"] and "ask" in result["help"]
    heavy = {"numpy", "lancedb", "torch", "pyarrow", "transformers", "llama_cpp", "cv2", "av"}
    loaded = sorted({m.split(".")[0] for m in result["modules"]} & heavy)
    assert loaded == [], f"vidagent --help imports {loaded}"
