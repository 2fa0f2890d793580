"""This CPU's speed at the offline stages, learned from its own runs, for ``index --dry-run``.

The offline stages' estimates are CPU seconds per unit (frames, seconds of audio, clips)
measured on one machine (:data:`~vidagent.ingest.base.MEASURED_ON`). Other CPUs differ: the same
20-minute video took 118.5 CPU seconds there and 184 on 2 cores of an Intel Xeon with AVX-512,
so the dry run said 66 s where the run took 96 s there (-31%). Instead of guessing a CPU's
speed from its name, each complete run of ``index_path`` records how many CPU seconds the
process spent against the reference figures' estimate of the same work, and later estimates on
the same CPU scale their offline stages by that ratio (:func:`machine_speed`).

What counts as a measurement (:func:`~vidagent.ingest.pipeline.index_path` decides, then
:func:`learn`):

- a fresh run: the structure pass decoded the video, and every stage asked for ran over every
  clip, or over none where its estimate foresaw no work (the speakers stage without its voice
  encoder); a resumed, stopped or partial run did less than the estimate counts;
- all of its work is measured offline work (:func:`measured_work`): no stage called an endpoint
  (its time is waiting, not computing), and every stage that worked has measured figures (a
  Whisper or OCR model no figure was measured for would be counted as the CPU's slowness);
- at least :data:`MIN_CPU_SECONDS` of estimated CPU work, so that the fixed costs (loading the
  models, the commits) do not decide the ratio, and a ratio in :data:`RATIOS`;
- nothing else ran in this process at the same time: another ``index_path``, or a question
  (:data:`RUNS`; a server indexing an upload while answering would count both); and the
  process is not one of several workers indexing at once (``--jobs``, Ray), which contend for
  the cores.

The ratio is process CPU seconds (every thread's, :func:`time.process_time`) over the reference
CPU seconds of the same work (:attr:`~vidagent.ingest.base.StageEstimate.cpu_seconds`: CPU
figures as measured, wall figures as CPU seconds of one core), neither depending on how many
cores this process may use; so neither does the speed, and a busy machine (where the wall time
grows but the work hardly does) teaches a slower CPU far less than wall time would (shared
caches and a core's other hyperthread still slow the work itself). The runs are averaged weighted by
their estimated work, each older run counting half as much at every new one (:data:`DECAY`),
so an upgrade of a model or of the machine shows within a few runs. They are kept per CPU
(model name, family and model number, and the vector extensions the models' kernels choose
between), in ``<home>/speed.json``, updated under a lock file so that processes indexing at
once (``--jobs``) each add their run; a file that cannot be read is treated as no runs yet, and
rewritten whole at the next run. Learning never fails a run: what goes wrong is logged.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import platform
import tempfile
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.ingest.base import MEASURED_ON

if TYPE_CHECKING:
    from collections.abc import Iterator

    from vidagent.config import Settings
    from vidagent.ingest.base import StageEstimate

#: The file in the home directory that keeps the runs' ratios, per CPU.
FILE = "speed.json"
#: Estimated CPU seconds a run must hold to be learned from (a 3-minute clip has about 26).
MIN_CPU_SECONDS = 30.0
#: The ratios a run may teach (CPU seconds here per reference CPU second): beyond them the run
#: measured something else than the CPU's speed (a process stopped and resumed, a clock jump).
RATIOS = (0.05, 50.0)
#: Weight kept by the runs before at each new run.
DECAY = 0.5
#: /proc/cpuinfo flags that choose the models' kernels (part of a CPU's key).
KEY_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile")


@dataclass(frozen=True)
class Speed:
    """How the offline stages' reference figures scale on this CPU."""

    #: CPU seconds here per CPU second of :data:`~vidagent.ingest.base.MEASURED_ON`'s figures
    factor: float = 1.0
    #: the runs it was learned from (0: none, the reference figures as they are)
    runs: int = 0
    #: when the last of them ended (ISO 8601, UTC), "" without runs
    last: str = ""
    cpu: str = ""
    #: why the home's :data:`FILE` could not be read ("" when it could, or is not there)
    unread: str = ""

    def basis(self) -> str:
        """One line saying where the offline stages' times come from."""
        if self.unread:
            after = (
                "the next run that measures this CPU writes it anew"
                if self.unread in _NOT_RUNS
                else "no run is kept until it is fixed or removed"
            )
            return (
                f"offline stages timed as on {MEASURED_ON} ({FILE} in the home could not be "
                f"read: {self.unread}; {after})"
            )
        if not self.runs:
            return (
                f"offline stages timed as on {MEASURED_ON} (no run measured on this CPU yet; "
                "the first complete offline index of about 4 minutes of video or more, run "
                "without --jobs, measures it)"
            )
        runs = "1 run" if self.runs == 1 else f"{self.runs} runs"
        return (
            f"offline stages timed at this CPU's speed, {self.factor:.2f}x the CPU seconds of "
            f"{MEASURED_ON}, measured by {runs} here (last {self.last[:10]})"
        )

    def to_json(self) -> dict[str, Any]:
        found = {"factor": self.factor, "runs": self.runs, "last": self.last, "cpu": self.cpu}
        return found | ({"unread": self.unread} if self.unread else {})


@functools.lru_cache(maxsize=4)
def cpu_key(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """This CPU, as its runs are kept: model name, family and model number, the kernels' flags.

    A virtual machine often names every Xeon ``Intel(R) Xeon(R) Processor``; the model number
    and the vector extensions tell the generations apart."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
        if not line.strip():
            break  # the first processor's block
    flags = set(fields.get("flags", "").split())
    name = fields.get("model name") or platform.machine()
    number = f"family {fields.get('cpu family', '?')} model {fields.get('model', '?')}"
    return f"{name} ({number}; {' '.join(f for f in KEY_FLAGS if f in flags) or 'no AVX2'})"


def machine_speed(settings: Settings) -> Speed:
    """This CPU's learned speed, or the reference figures' (``factor`` 1, ``runs`` 0)."""
    key = cpu_key()
    book, unread = _read(settings.home / FILE)
    return dataclasses.replace(_entry(book, key), unread=unread)


def _entry(book: dict[str, Any], key: str) -> Speed:
    entry = book.get(key)
    if not isinstance(entry, dict):
        return Speed(cpu=key)
    try:
        factor, runs = float(entry["factor"]), int(entry["runs"])
    except (KeyError, TypeError, ValueError):
        return Speed(cpu=key)
    if not RATIOS[0] <= factor <= RATIOS[1] or runs < 1:  # not a ratio a run can give: ignored
        return Speed(cpu=key)
    return Speed(factor, runs, str(entry.get("last", "")), key)


def measured_work(rows: list[StageEstimate], worked: set[str]) -> float | None:
    """The reference CPU seconds of ``rows``; None when part of the work is not measured
    offline work: a row timed otherwise (an endpoint's calls), or a stage in ``worked`` (the
    stages that did work, ``structure`` included) without measured figures."""
    if any(not r.cpu_seconds and (r.seconds > 0 or r.stage in worked) for r in rows):
        return None
    return sum(r.cpu_seconds for r in rows)


def learn(settings: Settings, estimated_cpu: float, used_cpu: float) -> Speed | None:
    """Fold one complete run into this CPU's speed and store it; None when the run is too
    small to say (:data:`MIN_CPU_SECONDS`), its ratio is not a CPU's (:data:`RATIOS`), or
    nothing could be stored (a read-only home)."""
    if estimated_cpu <= 0 or estimated_cpu < MIN_CPU_SECONDS:
        return None
    if not RATIOS[0] <= used_cpu / estimated_cpu <= RATIOS[1]:
        return None
    key = cpu_key()
    path = settings.home / FILE
    with _LOCK, _locked(path):
        book, _ = _read(path)  # one that cannot be read is written anew
        old = _entry(book, key)
        try:
            weight = float(book[key]["weight"]) * DECAY if old.runs else 0.0
        except (KeyError, TypeError, ValueError):
            weight = 0.0
        weight = max(weight, 0.0)
        ratio = used_cpu / estimated_cpu
        factor = (old.factor * weight + ratio * estimated_cpu) / (weight + estimated_cpu)
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        book[key] = {
            "factor": round(factor, 4),
            "runs": old.runs + 1,
            "weight": round(weight + estimated_cpu, 1),
            "last": now,
            "last_ratio": round(ratio, 4),
        }
        try:
            _write(path, book)
        except OSError:
            return None
    return Speed(round(factor, 4), old.runs + 1, now, key)


class Overlap:
    """Which ``index_path`` runs of this process ran alone (:meth:`alone`): a run that had
    another beside it, at any moment, is not learned from; nor is any run of a process that
    shares its machine with others doing the same work (:meth:`beside_others`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, bool] = {}  # run token -> overlapped so far
        self._next = 0
        self._shared = False

    def beside_others(self) -> None:
        """Mark this process as one of several working at once (a worker of ``--jobs`` or of
        a Ray cluster): two index processes on 2 cores taught 1.44x where one alone taught
        1.14x for the same 5-minute video, the contention counted as the CPU's slowness."""
        self._shared = True

    @contextlib.contextmanager
    def run(self) -> Iterator[int]:
        with self._lock:
            token, self._next = self._next, self._next + 1
            others = bool(self._running)
            for other in self._running:
                self._running[other] = True
            self._running[token] = others
        try:
            yield token
        finally:
            with self._lock:
                self._running.pop(token, None)

    def alone(self, token: int) -> bool:
        with self._lock:
            return not self._shared and not self._running.get(token, True)


#: This process's runs (:func:`~vidagent.ingest.pipeline.index_path` enters it).
RUNS = Overlap()
_LOCK = threading.Lock()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock file (``.lock`` beside it) against other processes, where the
    system has ``flock``; without it, or where the lock cannot be made, the update goes on
    unlocked (two processes may then keep one run of the two)."""
    try:
        import fcntl

        path.parent.mkdir(parents=True, exist_ok=True)
        held = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 (closed below)
    except (ImportError, OSError):
        yield
        return
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        yield
    finally:
        held.close()  # releases the lock


#: Why a file that was read holds no runs (one a run can write over).
_NOT_RUNS = ("not JSON", "not a JSON object")


def _read(path: Path) -> tuple[dict[str, Any], str]:
    """The runs kept in ``path``, and why they could not be read ("" if they could, or if
    there is no file yet)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, ""
    except OSError as e:
        return {}, e.strerror or type(e).__name__
    except ValueError:
        return {}, _NOT_RUNS[0]
    return (data, "") if isinstance(data, dict) else ({}, _NOT_RUNS[1])


def _write(path: Path, book: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, part = tempfile.mkstemp(prefix=".speed-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(book, out, indent=1, sort_keys=True)
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise
