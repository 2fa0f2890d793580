"""Real video clips for tests and benchmarks, taken from Debian packages.

Debian ships a few freely licensed clips inside ordinary packages; ``apt-get download`` plus
``dpkg -x`` gets them without root and without any other download site. Clips are cached under
``<repo>/.cache/media/`` (gitignored), so only the first run downloads (about 107 MB of
``.deb`` files, deleted once the clips are extracted).

In tests use :func:`get_clip`, which skips the test with the reason when the clip cannot be had.
Elsewhere use :func:`fetch_clip`, which raises. ``python tests/realmedia.py`` prefetches them all.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "media"
_FAILED: dict[str, str] = {}  # package -> reason, so a failed download is tried once a process

_OPENCV_DATA = "usr/share/doc/opencv-doc/examples/data"
CLIPS: dict[str, tuple[str, str]] = {
    # name: (Debian package, path inside the package)
    # 180 s, 480x352, 29.97 fps H.264; AAC stereo English narration; Creative Commons animation.
    "wannaworktogether.mp4": (
        "openboard-common",
        "usr/share/openboard/library/videos/wannaworktogether.mp4",
    ),
    # 79.5 s, 768x576, 10 fps MS-MPEG4v3; no audio; pedestrians seen by a fixed camera.
    "vtest.avi": ("opencv-doc", f"{_OPENCV_DATA}/vtest.avi"),
    # 11.3 s, 720x528, 23.976 fps MPEG-4 part 2; AC-3 stereo; a film trailer excerpt.
    "Megamind.avi": ("opencv-doc", f"{_OPENCV_DATA}/Megamind.avi"),
}


def fetch_clip(name: str) -> Path:
    """Return the cached clip, downloading and extracting its package on first use.

    Raises:
        KeyError: Unknown clip name.
        RuntimeError: apt-get or dpkg is missing, or the download or extraction failed.
    """
    package, inner = CLIPS[name]
    target = CACHE / name
    if target.is_file():
        return target
    if package in _FAILED:
        raise RuntimeError(_FAILED[package])
    with _cache_lock():  # pytest-xdist workers (or two runs) may want the same clip at once
        if target.is_file():  # another process fetched it while this one waited
            return target
        try:
            _extract(package)
        except RuntimeError as exc:
            _FAILED[package] = str(exc)
            raise
    if not target.is_file():
        raise RuntimeError(f"{package} does not contain {inner}")
    return target


@contextmanager
def _cache_lock() -> Iterator[None]:
    """Holds an exclusive lock on the cache folder for one process at a time."""
    import fcntl

    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _extract(package: str) -> None:
    """Download one package and copy every clip it provides into the cache."""
    for tool in ("apt-get", "dpkg"):
        if shutil.which(tool) is None:
            raise RuntimeError(f"{tool} is not available to fetch {package}")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
        work = Path(tmp)
        try:
            _run(["apt-get", "download", package], work)
        except RuntimeError:
            if os.geteuid() != 0:
                raise
            # A fresh machine may have empty package lists; as root, refresh them once.
            _run(["apt-get", "update"], work)
            _run(["apt-get", "download", package], work)
        debs = sorted(work.glob(f"{package}_*.deb"))
        if not debs:
            raise RuntimeError(f"apt-get download {package} produced no .deb")
        _run(["dpkg", "-x", str(debs[0]), "root"], work)
        # Keep every clip this package provides, so one download serves them all.
        for other, (pkg, path) in CLIPS.items():
            source = work / "root" / path
            if pkg == package and source.is_file() and not (CACHE / other).is_file():
                partial = CACHE / f".{other}.part"
                shutil.copyfile(source, partial)
                partial.replace(CACHE / other)  # atomic: no half-written clip in the cache


def get_clip(name: str) -> Path:
    """Like :func:`fetch_clip`, but skips the calling test when the clip cannot be had."""
    import pytest

    try:
        return fetch_clip(name)
    except RuntimeError as exc:
        pytest.skip(f"real clip {name} unavailable: {exc}")


def fetch_all() -> int:
    """Prefetch every clip; returns a process exit status."""
    status = 0
    for name in CLIPS:
        try:
            print(f"{name}: {fetch_clip(name)}")
        except RuntimeError as exc:
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            status = 1
    return status


def _run(cmd: list[str], cwd: Path) -> None:
    try:
        subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, text=True, timeout=300)
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or exc.stdout or "").strip().splitlines()
        raise RuntimeError(f"{' '.join(cmd)} failed: {detail[-1] if detail else exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{' '.join(cmd)} timed out") from exc


if __name__ == "__main__":
    sys.exit(fetch_all())
