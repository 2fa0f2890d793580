"""Error families of vidagent.

Every error says whose fault it is, so callers can react by type, never by message text::

    VidagentError
    ├── UserError                    the caller must change something; the message says what
    │   ├── ConfigError              a bad setting, config file or spec string
    │   ├── BackendMissingError      an optional backend is not installed; names the extra
    │   └── ToolInputError           a tool call's arguments cannot be used: shown to the model
    ├── MediaError                   a file cannot be used as a video (carries .path)
    │   ├── MediaNotFoundError       the path does not exist or cannot be read
    │   ├── NotAVideoError           no decodable container, or no video stream
    │   │   └── AudioOnlyError       a container with audio streams only
    │   ├── CorruptMediaError        truncated or damaged: the container promises more than it holds
    │   ├── EmptyMediaError          zero duration or no frames
    │   └── NoAudioError             audio was asked for and the video has none
    ├── LibraryError                 the on-disk index
    │   ├── VideoNotFoundError       no such video id (or unique prefix) in the Library
    │   ├── LibraryVersionError      written by a newer vidagent, or a migration failed
    │   └── EmbeddingMismatchError   vectors of another model or dimension than the manifest's
    ├── StorageError                 the system refused a write: disk full, permission denied,
    │                                read-only filesystem (carries .path and .errno)
    └── ProviderError                a model endpoint or local model failed
        ├── RetryableError           retried with backoff by the client layer
        │   ├── ProviderTimeout
        │   ├── RateLimitError       HTTP 429; carries .retry_after when the server sent one
        │   ├── ServerError          HTTP 5xx
        │   └── MalformedResponseError  a body that is not what the protocol promises
        ├── RequestRejectedError     other HTTP 4xx: the request itself is wrong; not retried
        │   └── ContextOverflowError the request does not fit the model's context window
        └── CacheMissError           replay mode asked for a response that was never recorded

A :class:`StorageError` is operational: neither the caller's input nor a bug, but the
machine's state, named with the folder and what to do. The Library turns the operating
system's refusals into it at its write lock (every write runs inside it), and the front ends
turn any other write that the system refused (a trace, a job record, an upload) into it with
:func:`storage_error` before they would call an error a bug. Lance commits are atomic, so a
write that fails this way leaves the Library as it was before it.

Our own bugs are not wrapped: they propagate as ordinary Python exceptions (the CLI prints
them as one line, :func:`describe`, and writes the traceback to a file).

Inside an agent run, a :class:`ToolInputError`, :class:`LibraryError` or :class:`MediaError`
raised by a tool, and a :class:`ProviderError` from a model a tool called, come back to the
reasoning model as an observation it can react to; a :class:`ProviderError` of the reasoning
model itself ends the search with a forced answer whose reason is recorded. Every other
:class:`UserError` stops the run with its one-line message; anything else is a bug.
"""

from __future__ import annotations

import errno as _errno
import os
import re
from pathlib import Path


class VidagentError(Exception):
    """Base of every error vidagent raises on purpose."""


class UserError(VidagentError):
    """The caller must change something; the message says what."""


class ConfigError(UserError):
    """A bad setting, config file or model spec string."""


class BackendMissingError(UserError):
    """An optional backend is not installed."""

    def __init__(self, what: str, extra: str) -> None:
        self.extra = extra
        super().__init__(
            f"{what} is not installed; install it with: pip install 'vidagent[{extra}]'"
        )


class ToolInputError(UserError):
    """A tool call's arguments or input cannot be used (a time after the video's end, an empty
    query); the agent runtime shows the message to the model so that it can fix the call."""


class IndexStopped(VidagentError):
    """Indexing was asked to stop (a cancelled job, Ctrl-C) and stopped between clips: every
    clip a stage finished is written, so indexing the file again resumes with what is left."""

    def __init__(self) -> None:
        super().__init__(
            "indexing stopped; what it finished is kept (index the file again to resume)"
        )


class MediaError(VidagentError):
    """A file cannot be used as a video."""

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class MediaNotFoundError(MediaError):
    """The path does not exist or cannot be read."""


class NotAVideoError(MediaError):
    """No decodable container, or a container without a video stream."""


class AudioOnlyError(NotAVideoError):
    """A container with audio streams and no video stream."""


class CorruptMediaError(MediaError):
    """Truncated or damaged: the container promises more than the file holds."""


class EmptyMediaError(MediaError):
    """Zero duration or no decodable frames."""


class NoAudioError(MediaError):
    """Audio was asked for and the video has no audio stream."""


class LibraryError(VidagentError):
    """A problem with the on-disk index."""


class NoLibraryError(LibraryError):
    """There is no Library at the location (opened for reading, never created)."""


class VideoNotFoundError(LibraryError):
    """No video with that id (or unique id prefix) in the Library."""


class AmbiguousVideoError(VideoNotFoundError):
    """A reference that names several videos of the Library (an id prefix, a file stem)."""


class LibraryVersionError(LibraryError):
    """The Library was written by a newer vidagent, or a migration failed."""


class EmbeddingMismatchError(LibraryError):
    """Vectors from another model or of another dimension than the manifest records."""


class StorageError(VidagentError):
    """The operating system refused a write: the disk is full (or over quota), permission is
    denied, or the filesystem is read-only.

    Attributes:
        path: the folder (or file) the write went to.
        errno: the system's error number (``errno.ENOSPC``, ``EACCES``, ``EPERM``, ``EROFS``,
            ``EDQUOT``).
        option: the option that names another place for a file the user asked for (``-o``);
            ``""``: the Library's or the home's (the advice names ``--library``, ``--home``).
    """

    def __init__(self, path: str | Path, errno: int, option: str = "") -> None:
        self.path = str(path)
        self.errno = errno
        self.option = option
        kind = _storage_kind(errno)
        advice = _OUTPUT_ADVICE[kind].format(option=option) if option else _STORAGE_ADVICE[kind]
        super().__init__(f"{self.path}: {advice}")

    def __reduce__(self) -> tuple[type[StorageError], tuple[str, int, str]]:
        # Raised in a pool or Ray worker, it crosses to the driver by pickle.
        return (type(self), (self.path, self.errno, self.option))

    @property
    def disk_full(self) -> bool:
        """No space (or quota) was left: freeing space fixes it."""
        return _storage_kind(self.errno) == "full"


_STORAGE_ADVICE = {
    "full": "no space left on the device (disk full); free space there, or give another folder "
    "(--library, --home), and run it again: nothing stored before was lost",
    "denied": "permission denied; make the folder writable by this user, or give another "
    "folder (--library, --home)",
    "readonly": "the filesystem is read-only; remount it read-write, or copy the Library to a "
    "writable folder and give that (--library)",
}
#: the same, for a file the user asked for (an image, a bundle, subtitles): named by ``option``
_OUTPUT_ADVICE = {
    "full": "no space left on the device (disk full); free space there, or give another {option}",
    "denied": "permission denied; give another {option}, or make the folder writable by this user",
    "readonly": "the filesystem is read-only; give another {option}",
}
_STORAGE_ERRNOS = {
    _errno.ENOSPC: "full",
    _errno.EDQUOT: "full",
    _errno.EACCES: "denied",
    _errno.EPERM: "denied",
    _errno.EROFS: "readonly",
}
# Lance and LanceDB (Rust) flatten an I/O error into their message; Rust's io::Error always
# ends its text with "(os error N)", the one typed fact left, so that is what is read.
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def _storage_kind(number: int) -> str:
    return _STORAGE_ERRNOS.get(number, "full")


#: The CLI options an error message may name that an HTTP or MCP client gives as parameters
#: of the same name (the sheet route's ``from``, ``search``'s ``last``).
_OPTIONS = re.compile(r"--(from|to|count|columns|last|since|until)\b")


def for_api(message: str) -> str:
    """``message`` worded for an HTTP or MCP client: the CLI options it names as the parameters
    of the same name (``--to must be after --from``: ```to` must be after `from```)."""
    return _OPTIONS.sub(r"`\1`", message)


def storage_error(
    error: BaseException, path: str | Path | None = None, option: str = ""
) -> StorageError | None:
    """The :class:`StorageError` that ``error`` is, or None when it is something else.

    Found by error number, never by words: an ``OSError`` (pyarrow's included) whose ``errno``
    is a full disk, a denied permission or a read-only filesystem, or a Lance error whose
    message carries Rust's ``(os error N)`` with such a number, anywhere in the chain of
    causes. ``path`` names the folder (default: the file the ``OSError`` names, else its
    folder; else "the disk"); ``option``, where the write was of a file the user named, is the
    option that names another place (``-o``).
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, StorageError):
            return current
        number = _errno_of(current)
        if number in _STORAGE_ERRNOS:
            where = path if path is not None else _filename(current)
            return StorageError(where or "the disk", number, option)
        current = current.__cause__ or current.__context__
    return None


def output_error(
    error: BaseException, target: str | Path, option: str = "-o", place: str | Path | None = None
) -> VidagentError:
    """The one-line error of a failed write of a file the user named (``-o``): a
    :class:`StorageError` naming ``place`` (default: ``target``, not a file written on the way
    to it) for a full disk, a denied permission or a read-only filesystem, else a
    :class:`UserError` saying what the system said (a file where a folder must be, a name
    too long, a place where no file can be made, as ``/proc``)."""
    refused = storage_error(error)
    if refused is not None:
        return StorageError(target if place is None else place, refused.errno, option)
    why = error.strerror if isinstance(error, OSError) and error.strerror else error
    if isinstance(error, FileExistsError) and error.filename:  # a folder to make is a file
        why = f"{error.filename} is a file, not a folder"
    return UserError(f"cannot write {target}: {why}; give another {option}")


def _errno_of(error: BaseException) -> int | None:
    if isinstance(error, OSError) and isinstance(error.errno, int):
        return error.errno
    found = _RUST_OS_ERROR.search(str(error))
    return int(found.group(1)) if found else None


def _filename(error: BaseException) -> str | None:
    name = getattr(error, "filename", None)
    if not isinstance(name, (str, bytes, os.PathLike)):
        return None
    name = os.fsdecode(name)
    return name if os.path.isdir(name) else os.path.dirname(name) or name


class ProviderError(VidagentError):
    """A model endpoint or local model failed."""

    def __init__(self, message: str, *, endpoint: str = "", status: int | None = None) -> None:
        self.endpoint = endpoint
        self.status = status
        super().__init__(f"{endpoint}: {message}" if endpoint else message)


class RetryableError(ProviderError):
    """A failure worth retrying with backoff."""

    retry_after: float | None = None


class ProviderTimeout(RetryableError):
    """The endpoint did not answer in time."""


class RateLimitError(RetryableError):
    """HTTP 429 from the endpoint."""

    def __init__(
        self, message: str, *, endpoint: str = "", retry_after: float | None = None
    ) -> None:
        super().__init__(message, endpoint=endpoint, status=429)
        self.retry_after = retry_after


class ServerError(RetryableError):
    """HTTP 5xx from the endpoint."""


class EndpointUnreachable(ServerError):
    """No connection could be made to the endpoint (refused, or its name not resolved), after
    the retries: a second call to it now would fail the same way."""


class MalformedResponseError(RetryableError):
    """A response body that does not follow the protocol."""


class RequestRejectedError(ProviderError):
    """HTTP 4xx other than 429: the request is wrong and retrying will not help."""


class ContextOverflowError(RequestRejectedError):
    """The request does not fit the model's context window, even after fitting."""


class CacheMissError(ProviderError):
    """Replay mode asked for a response that was never recorded."""


def describe(error: BaseException, limit: int = 300) -> str:
    """An error as one line: its type and the first line of its message (at most ``limit``
    characters), as traces, the CLI and wrapped runtime errors show it."""
    text = str(error).strip()
    first = text.splitlines()[0][:limit] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__
