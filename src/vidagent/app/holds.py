"""One process at a time on a folder: an exclusive ``flock`` held while a job writes there.

A watch holds its stream's folder (two watchers of one source would index each window twice), a
benchmark run its run folder (two runs into one ``--out`` would both answer every question and
write every row twice). The operating system lets the lock go when the process ends, ``kill -9``
included, so a resumed job finds it free. POSIX only, as the Library's write lock.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO

from vidagent.exceptions import ConfigError


def hold(path: Path, busy: Callable[[str], str]) -> IO[str]:
    """Take the lock file ``path`` (created with its folder) and write this process's id into
    it; the lock is held until the returned file is closed.

    Raises:
        ConfigError: another process holds it; the message is ``busy`` of that process's id.
    """
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+", encoding="utf-8")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        pid = handle.read().strip() or "?"
        handle.close()
        raise ConfigError(busy(pid)) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def held(path: Path) -> bool:
    """Whether a process holds the lock file ``path`` now (a missing file: no)."""
    import fcntl

    if not path.is_file():
        return False
    with path.open(encoding="utf-8") as handle:
        try:  # shared and at once: a holder's exclusive lock refuses it
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False
