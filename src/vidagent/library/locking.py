"""The Library's write lock: one writer at a time per location, across threads and processes.

:class:`WriteLock` is an in-process ``threading.RLock`` plus, for local Libraries, an exclusive
``fcntl.flock`` on a file in the Library directory (:data:`LOCK_FILE`), taken by a thread's
outermost hold and released when it ends. Nested holds in one thread only count depth, so a
write made of other writes never deadlocks. There is one lock per location in a process
(:func:`lock_for`), shared by every Library object opened on it.

``flock`` is advisory and per open file: every vidagent process honours it, and it is released
by the kernel when a holder dies, so a SIGKILLed writer never leaves a stale lock. It works on
local disks and on NFS (Linux maps it to POSIX locks there). Windows has no ``flock``: only the
in-process lock applies there.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

if sys.platform != "win32":
    import fcntl

#: The lock file's name inside a local Library directory.
LOCK_FILE = ".write.lock"


class WriteLock:
    """Re-entrant within a thread, exclusive across threads and (with a file) processes.

    The file lock is taken by the outermost hold of a thread and released when it ends. The
    file is opened per hold: ``flock`` belongs to the open file, so a fresh one per hold keeps
    two holders in one process (which the RLock already orders) from sharing it by accident.
    """

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._reset()

    def _reset(self) -> None:
        self._rlock = threading.RLock()
        self._depth = 0
        self._fd: int | None = None

    def after_fork(self) -> None:
        # The child inherits the lock's state as it was in the forking thread's parent. It
        # closes (never unlocks: the open file is shared with the parent) an inherited file.
        if self._fd is not None:
            os.close(self._fd)
        self._reset()

    @contextmanager
    def hold(self) -> Iterator[None]:
        with self._rlock:
            if self._depth == 0 and self.path is not None and sys.platform != "win32":
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX)
                except BaseException:
                    os.close(fd)
                    raise
                self._fd = fd
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fd is not None:
                    fd, self._fd = self._fd, None
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)


# One lock per Library location in a process, shared by every Library object opened on it:
# two objects on one directory must take turns (a per-object lock would let them both in and
# leave them to the file lock, which would deadlock one writer nested in the other's write).
_LOCKS: weakref.WeakValueDictionary[str, WriteLock] = weakref.WeakValueDictionary()
_LOCKS_GUARD = threading.Lock()


def lock_for(location: str, path: str | None) -> WriteLock:
    with _LOCKS_GUARD:
        lock = _LOCKS.get(location)
        if lock is None:
            lock = _LOCKS[location] = WriteLock(path)
        return lock


def _after_fork_in_child() -> None:
    global _LOCKS_GUARD
    _LOCKS_GUARD = threading.Lock()
    for lock in list(_LOCKS.values()):
        lock.after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
