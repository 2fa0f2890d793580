"""The Library is a façade over parts that share one table owner (store.py's module doc)."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import numpy as np
from factories import video_record

import vidagent.library
from vidagent.library import ClipRow, Library
from vidagent.library.indexing import index_names

LIBRARY = Path(vidagent.library.__file__).parent


def test_every_part_reads_and_writes_through_the_one_table_owner(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    assert Library.__bases__ == (object,)  # composed, not mixed in
    parts = [lib.rows, lib.derived, lib.vectors, lib.graph, lib.indexes]
    assert all(part.tables is lib.tables for part in parts)


def test_a_write_through_any_part_waits_for_the_one_write_lock(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    lib.use_embedding("clip_vectors", "fake:hash?dim=4", 4)
    clip = ClipRow("v1", 0, 0.0, 5.0, caption="a clip")
    writes = {
        "rows": lambda: lib.rows.put_clips("v1", [clip]),
        "vectors": lambda: lib.vectors.put_clip_vectors(
            "v1", "fake:hash?dim=4", [clip], np.ones((1, 4), np.float32)
        ),
        "manifest": lambda: lib.tables.set_sampling(clip_seconds=5),
    }
    for name, write in writes.items():
        done = threading.Event()
        with lib.write_lock():
            worker = threading.Thread(target=lambda w=write, d=done: (w(), d.set()))
            worker.start()
            time.sleep(0.3)
            assert not done.is_set(), f"a {name} write went ahead while the lock was held"
        worker.join(timeout=30)
        assert done.is_set(), name


def test_writes_build_indexes_by_the_policy_another_process_recorded(tmp_path: Path) -> None:
    lib = Library(tmp_path / "lib")
    Library(tmp_path / "lib").set_index_policy(scalar_min_rows=1)  # another opener records it
    lib.reload_manifest()
    lib.put_clips("v1", [ClipRow("v1", i, 5.0 * i, 5.0 * i + 5) for i in range(3)])
    lib.put_video(video_record("v1", 15.0))
    assert lib.index_policy().scalar_min_rows == 1
    assert "video_id" in index_names(lib.table("clips"))


def _imports(path: Path) -> set[str]:
    """Every ``vidagent.library`` module a file imports: module level, lazy and type-only."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vidagent.library"):
            found.add(node.module or "")
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("vidagent.library")}
    return found


def test_no_module_of_the_library_package_imports_one_that_imports_it_back() -> None:
    graph = {
        f"vidagent.library.{p.stem}": _imports(p)
        for p in LIBRARY.glob("*.py")
        if p.name != "__init__.py"
    }

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for dep in graph.get(todo.pop(), ()):
                if dep == goal:
                    return True
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        return False

    assert [m for m in sorted(graph) if reaches(m, m)] == []
