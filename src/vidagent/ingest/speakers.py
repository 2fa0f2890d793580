"""The speakers stage: who speaks each transcript segment, offline (``S1``, ``S2``, …).

Diarization over the transcript, on bundled weights only:

1. **Windows.** Each transcript segment (Whisper's, so speech already found by its Silero VAD)
   is cut into ``round(length / 1.6 s)`` equal windows, at least one.
2. **Embeddings.** Each window is embedded by Resemblyzer's voice encoder
   (:mod:`vidagent.models.voices`, weights shipped in the ``resemblyzer`` wheel).
3. **Clusters.** Agglomerative clustering of the windows, average linkage on cosine distance,
   cut at ``threshold`` (default 0.3): the number of speakers is the number of clusters, not
   given. A cluster with less than ``min_seconds`` (default 3) of speech joins the nearest
   larger one (a cough or a laugh is not a speaker).
4. **Labels.** A segment takes the cluster holding most of its windows' time; clusters are
   named ``S1``, ``S2``, … in the order they first speak.

The labels go on the ``transcript`` rows (``speaker``), then a ``"speakers"`` artefact (key
``""``) records each label's talk time, this stage's fingerprint and a hash of the segments it
labelled (their indexes, times and text): the stage is pending until that artefact matches, so
a killed run labels again from the start (it is seconds), and a new transcript is labelled
anew. The names a user gives the labels (``vidagent speakers VIDEO rename S1 "Dr Lee"``) are
another artefact (key ``"names"``) this stage never touches; labels are numbered by first
appearance, so relabelling the same transcript keeps them.

``settings.speakers = "off"`` skips the stage. Without the ``speakers`` extra it labels
nothing and says so in its note, and stays pending for a later run.

Measured by ``benchmarks/diarization.py`` (diarization error rate, share of ingest time).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from vidagent.exceptions import NoAudioError
from vidagent.ingest.base import IngestContext, Stage, StageEstimate, text_hash
from vidagent.library.schema import Artifact, TranscriptSegment
from vidagent.media import extract_audio

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo
    from vidagent.models.voices import VoiceEncoder

SAMPLE_RATE = 16000
WINDOW_SECONDS = 1.6  # one partial of the voice encoder
THRESHOLD = 0.3
MIN_SECONDS = 3.0
#: Processing seconds per second of speech, measured on 2 CPU cores by
#: ``benchmarks/diarization.py`` (audio decode, embeddings, clustering).
REAL_TIME_FACTOR = 0.03

Window = tuple[int, float, float]  # (segment position, t0, t1)


def speech_windows(segments: Sequence[TranscriptSegment]) -> list[Window]:
    """Each segment cut into ``round(length / 1.6 s)`` equal windows (at least one)."""
    out: list[Window] = []
    for k, s in enumerate(segments):
        length = s.t1 - s.t0
        if length <= 0:
            continue
        n = max(1, round(length / WINDOW_SECONDS))
        out += [(k, s.t0 + length * i / n, s.t0 + length * (i + 1) / n) for i in range(n)]
    return out


def cluster(
    vectors: np.ndarray, seconds: np.ndarray, threshold: float, min_seconds: float
) -> np.ndarray:
    """Cluster ids of the windows: average linkage on cosine distance cut at ``threshold``,
    then every cluster under ``min_seconds`` of speech merged into the nearest larger one.

    Args:
        vectors: the windows' unit embeddings.  # (N, D) float32
        seconds: each window's length.  # (N,)
    """
    if len(vectors) < 2:
        return np.zeros(len(vectors), dtype=int)
    from sklearn.cluster import AgglomerativeClustering

    found = AgglomerativeClustering(
        n_clusters=None, distance_threshold=threshold, metric="cosine", linkage="average"
    ).fit_predict(vectors)
    ids = np.unique(found)
    talk = {int(c): float(seconds[found == c].sum()) for c in ids}
    big = [c for c in talk if talk[c] >= min_seconds] or [max(talk, key=lambda c: talk[c])]
    centroids = np.stack([vectors[found == c].mean(axis=0) for c in big])  # (B, D)
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    out = found.copy()
    for i, c in enumerate(found):
        if int(c) not in big:
            out[i] = big[int(np.argmax(centroids @ vectors[i]))]
    return np.asarray(out)


def label_segments(count: int, windows: Sequence[Window], clusters: np.ndarray) -> list[str]:
    """A label per segment (``""`` for one with no window): the cluster with most of its
    windows' time, clusters named ``S1``, ``S2``, … by the first segment they label."""
    votes: list[dict[int, float]] = [{} for _ in range(count)]
    for (k, a, b), c in zip(windows, clusters, strict=True):
        votes[k][int(c)] = votes[k].get(int(c), 0.0) + (b - a)
    chosen = [max(v, key=lambda c: v[c]) if v else None for v in votes]
    names: dict[int, str] = {}
    for c in chosen:
        if c is not None and c not in names:
            names[c] = f"S{len(names) + 1}"
    return [names[c] if c is not None else "" for c in chosen]


def diarize(
    audio: np.ndarray,
    segments: Sequence[TranscriptSegment],
    encoder: VoiceEncoder,
    threshold: float = THRESHOLD,
    min_seconds: float = MIN_SECONDS,
) -> list[str]:
    """A speaker label per segment of ``segments`` (in their order).

    Args:
        audio: the video's audio.  # (S,) float32 at SAMPLE_RATE
    """
    windows = speech_windows(segments)
    pieces = [audio[round(a * SAMPLE_RATE) : round(b * SAMPLE_RATE)] for _, a, b in windows]
    vectors = encoder.embed(pieces)  # (N, 256)
    seconds = np.array([b - a for _, a, b in windows])
    return label_segments(len(segments), windows, cluster(vectors, seconds, threshold, min_seconds))


def transcript_hash(segments: Sequence[TranscriptSegment]) -> str:
    """What the labels were made from: the segments' indexes, times and text."""
    return text_hash(*(f"{s.segment_index}:{s.t0}:{s.t1}:{s.text}" for s in segments))


def talk_time(segments: Sequence[TranscriptSegment]) -> dict[str, dict[str, float]]:
    """Each label's seconds of speech and number of segments, by label."""
    out: dict[str, dict[str, float]] = {}
    for s in segments:
        if s.speaker:
            entry = out.setdefault(s.speaker, {"seconds": 0.0, "segments": 0})
            entry["seconds"] = round(entry["seconds"] + s.t1 - s.t0, 3)
            entry["segments"] += 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0][1:])))


class Speakers(Stage):
    """Speaker labels on the transcript rows (module docstring).

    Args:
        threshold: cosine distance at which clusters stop merging (larger: fewer speakers).
        min_seconds: least speech a cluster needs to be a speaker of its own.

    After :meth:`run`, ``note`` says why nothing was labelled, when nothing was.
    """

    name: ClassVar[str] = "speakers"

    def __init__(self, threshold: float = THRESHOLD, min_seconds: float = MIN_SECONDS) -> None:
        self.threshold = threshold
        self.min_seconds = min_seconds
        self.note = ""

    def fingerprint(self, settings: Settings) -> str:
        if settings.speakers == "off":
            return "off"
        return f"{settings.speakers}|threshold={self.threshold}|min={self.min_seconds}"

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        """Every clip while the stored labels were made by another fingerprint or from another
        transcript (the work is per video); none when the setting is off."""
        if ctx.settings.speakers == "off":
            self.note = "off (settings.speakers)"
            return []
        vid = ctx.video.video_id
        stored = ctx.library.artifact(vid, "speakers")
        current = (self.fingerprint(ctx.settings), transcript_hash(ctx.library.transcript(vid)))
        if stored is not None and (stored.producer, stored.inputs_hash) == current:
            return []
        return ctx.library.clips(vid)

    def run(self, ctx: IngestContext, clips: list[ClipRow], bar: tqdm) -> None:
        from vidagent.models import voices

        self.note = ""
        vid = ctx.video.video_id
        segments = ctx.library.transcript(vid)
        if segments and not voices.available():
            self.note = "not labelled: pip install 'vidagent[speakers]'"
            return
        audio = self._audio(ctx) if segments else None
        if audio is None:
            self.note = "no speech" if ctx.video.has_audio else "no audio track"
            labelled: list[TranscriptSegment] = []
        else:
            labels = diarize(
                audio, segments, voices.VoiceEncoder(), self.threshold, self.min_seconds
            )
            labelled = [_with(s, label) for s, label in zip(segments, labels, strict=True)]
            # Rows first, then the artefact: a crash in between leaves the stage pending.
            ctx.library.put_transcript(vid, labelled)
        talk = talk_time(labelled)
        ctx.library.put_artifact(
            Artifact(
                vid,
                "speakers",
                "",
                text=", ".join(f"{k} {v['seconds']:.0f} s" for k, v in talk.items()),
                data={"speakers": talk},
                producer=self.fingerprint(ctx.settings),
                inputs_hash=transcript_hash(segments),
            )
        )
        bar.update(len(clips))

    def _audio(self, ctx: IngestContext) -> np.ndarray | None:
        if not ctx.video.has_audio:
            return None
        try:
            return extract_audio(ctx.path, SAMPLE_RATE)
        except NoAudioError:
            return None

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        est = StageEstimate(self.name, None, self.fingerprint(settings))
        if settings.speakers == "off":
            est.notes.append("off (settings.speakers)")
        elif not info.has_audio:
            est.notes.append("no audio track")
        else:
            est.seconds = math.ceil(info.duration * REAL_TIME_FACTOR * 10) / 10
        return est


def _with(segment: TranscriptSegment, speaker: str) -> TranscriptSegment:
    from dataclasses import replace

    return replace(segment, speaker=speaker)
