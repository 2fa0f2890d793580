"""Imports go one way: the layers of DESIGN.md, read from the package's source with ``ast``.

media < models < library < ingest < tools < agents < app < server < cli. Each rule names what a layer
must not import (at module level, inside functions, or for type checking alike: a type-only
import is still a dependency a reader must follow).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import vidagent

PACKAGE = Path(vidagent.__file__).parent

#: layer -> prefixes of modules it must not import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "media": ("vidagent.models", "vidagent.library", "vidagent.ingest", "vidagent.tools",
              "vidagent.agents", "vidagent.bench", "vidagent.app", "vidagent.cli",
              "vidagent.config"),
    "models": ("vidagent.library", "vidagent.ingest", "vidagent.tools", "vidagent.agents",
               "vidagent.bench", "vidagent.app", "vidagent.cli", "vidagent.train"),
    "library": ("vidagent.models", "vidagent.config", "vidagent.ingest", "vidagent.tools",
                "vidagent.agents", "vidagent.bench", "vidagent.app", "vidagent.cli"),
    "ingest": ("vidagent.tools", "vidagent.agents", "vidagent.bench", "vidagent.app",
               "vidagent.cli"),
    "tools": ("vidagent.ingest", "vidagent.agents", "vidagent.bench", "vidagent.app",
              "vidagent.cli", "vidagent.media."),  # media's public package only
    "agents": ("vidagent.ingest", "vidagent.media", "vidagent.bench", "vidagent.app",
               "vidagent.cli"),
    "bench": ("vidagent.ingest", "vidagent.tools", "vidagent.app", "vidagent.cli",
              "vidagent.agents.run", "vidagent.agents.dvd", "vidagent.agents.videoagent2"),
    "app": ("vidagent.cli", "vidagent.server"),
    "server": ("vidagent.cli",),
    # RL training of the cvr master: models, agents' master protocol, no media or front ends
    "train": ("vidagent.ingest", "vidagent.media", "vidagent.bench", "vidagent.app",
              "vidagent.cli", "vidagent.server"),
}  # fmt: skip

#: what the CLI may import: the application layer and what it prints
CLI_ALLOWED = (
    "vidagent.app", "vidagent.budget", "vidagent.bench.report", "vidagent.bench.base",
    "vidagent.cli", "vidagent.config", "vidagent.exceptions", "vidagent.roles",
    "vidagent.server", "vidagent.timecode", "vidagent.trace", "vidagent.train",
)  # fmt: skip


def imports(path: Path) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` of every import in a file, relative ones resolved."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found.append((node.lineno, base, [a.name for a in node.names]))
    return found


def _under(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it; a prefix ending in a dot means its submodules only."""
    if prefix.endswith("."):
        return module.startswith(prefix)
    return module == prefix or module.startswith(prefix + ".")


def files(layer: str) -> list[Path]:
    root = PACKAGE / layer
    return sorted(root.rglob("*.py")) if root.is_dir() else [PACKAGE / f"{layer}.py"]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_no_higher_layer(layer: str) -> None:
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line} imports {module}"
        for path in files(layer)
        for line, module, _ in imports(path)
        if any(_under(module, p) for p in FORBIDDEN[layer])
    ]  # fmt: skip
    assert wrong == []


def test_the_cli_is_a_thin_shell_over_the_application_layer() -> None:
    wrong, private = [], []
    for path in files("cli"):
        for line, module, names in imports(path):
            if not module.startswith("vidagent") or module == "vidagent":
                continue
            if not any(module == a or module.startswith(a + ".") for a in CLI_ALLOWED):
                wrong.append(f"{path.name}:{line} imports {module}")
            if module.startswith("vidagent.cli") and any(n.startswith("_") for n in names):
                private.append(f"{path.name}:{line} imports {names} from {module}")
    assert wrong == [] and private == []


def test_the_rules_catch_a_violation(tmp_path: Path) -> None:
    """The checker itself: a file importing upwards is found."""
    bad = PACKAGE / "media" / "_layer_probe.py"
    bad.write_text("from vidagent.agents.base import Agent\n", encoding="utf-8")
    try:
        found = [m for _, m, _ in imports(bad)]
        assert found == ["vidagent.agents.base"]
        with pytest.raises(AssertionError):
            test_a_layer_imports_no_higher_layer("media")
    finally:
        bad.unlink()


def test_no_module_is_over_600_lines() -> None:
    long = [
        f"{p.relative_to(PACKAGE)}: {n}"
        for p in sorted(PACKAGE.rglob("*.py"))
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600
    ]
    assert long == []
