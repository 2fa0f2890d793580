"""The speakers stage: who speaks each transcript segment, offline (``S1``, ``S2``, …).

Diarization over the transcript, on bundled weights only:

1. **Windows.** Each transcript segment (Whisper's, so speech already found by its Silero VAD)
   is covered by back-to-back 1.6 s windows (the encoder's partial utterance), the last one
   ending at the segment's end; a segment shorter than that is one window.
2. **Embeddings.** Each window is embedded by Resemblyzer's voice encoder
   (:mod:`vidagent.models.voices`, weights shipped in the ``resemblyzer`` wheel) and a
   segment's vector is the normalised mean of its windows' (as Resemblyzer embeds an
   utterance). Single 1.6 s windows clustered on their own split one narrator with music
   behind him into 15 "speakers" (``benchmarks/diarization.py``); whole segments do not.
3. **Clusters.** Agglomerative clustering of the segments, average linkage on cosine
   distance, cut at ``threshold`` (default 0.4): the number of speakers is the number of
   clusters, not given. A cluster with less than ``min_seconds`` (default 3) of speech joins
   the nearest larger one (a cough or a laugh is not a speaker). 0.4 is where the real clips
   come out right: the one narrator of ``wannaworktogether.mp4`` stays one from 0.35 up, the
   two speakers of ``Megamind.avi`` are two from 0.35 to 0.45. Voices the encoder hears as
   alike (cosine similarity above 0.6, as espeak-ng's male variants of one voice are) are
   one speaker at this threshold.
4. **Labels.** Clusters are named ``S1``, ``S2``, … in the order they first speak; a segment
   (a turn, as Whisper cut it) has one speaker.

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

import itertools
import math
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from vidagent.exceptions import NoAudioError
from vidagent.ingest.base import IngestContext, Stage, StageEstimate, text_hash
from vidagent.library.schema import Artifact, TranscriptSegment
from vidagent.media import audio_spans, iter_audio

if TYPE_CHECKING:
    from tqdm import tqdm

    from vidagent.config import Settings
    from vidagent.library import ClipRow
    from vidagent.media import VideoInfo
    from vidagent.models.voices import VoiceEncoder

SAMPLE_RATE = 16000
WINDOW_SECONDS = 1.6  # one partial of the voice encoder
THRESHOLD = 0.4
MIN_SECONDS = 3.0
#: Processing seconds per second of video for the dry run's estimate: ``benchmarks/diarization.py``
#: measured 1.5 s for the 64 s meeting (0.023) and 0.6 s for the 180 s narration (0.003) on 2
#: shared cores, the encoder loaded beside ASR; 8.7 s for the narration (0.05) under a load
#: average of 12. The meeting's rate, rounded up.
REAL_TIME_FACTOR = 0.002

Window = tuple[int, float, float]  # (segment position, t0, t1)


def speech_windows(segments: Sequence[TranscriptSegment]) -> list[Window]:
    """Back-to-back 1.6 s windows over each segment, the last ending at its end (one window
    for a shorter segment)."""
    out: list[Window] = []
    for k, s in enumerate(segments):
        if s.t1 <= s.t0:
            continue
        n = max(1, math.ceil((s.t1 - s.t0) / WINDOW_SECONDS - 0.25))
        starts = [min(s.t0 + i * WINDOW_SECONDS, s.t1 - WINDOW_SECONDS) for i in range(n)]
        out += [(k, max(s.t0, a), min(s.t1, a + WINDOW_SECONDS)) for a in starts]
    return out


def segment_vectors(
    count: int, windows: Sequence[Window], vectors: np.ndarray
) -> tuple[list[int], np.ndarray]:
    """The segments with windows and each one's normalised mean window vector.

    Args:
        vectors: the windows' embeddings.  # (N, D)

    Returns:
        ``(positions, vectors)``: the segments' positions and their vectors.  # (M, D)
    """
    sums: dict[int, np.ndarray] = {}
    for (k, _, _), v in zip(windows, vectors, strict=True):
        sums[k] = sums.get(k, 0) + v
    positions = sorted(sums)
    if not positions:
        return [], np.zeros((0, vectors.shape[1] if vectors.ndim == 2 else 0), np.float32)
    out = np.stack([sums[k] for k in positions])
    return positions, out / np.linalg.norm(out, axis=1, keepdims=True).clip(1e-8)


def cluster(
    vectors: np.ndarray, seconds: np.ndarray, threshold: float, min_seconds: float
) -> np.ndarray:
    """Cluster ids of the rows: average linkage on cosine distance cut at ``threshold``,
    then every cluster under ``min_seconds`` of speech merged into the nearest larger one.

    Args:
        vectors: unit embeddings.  # (N, D) float32
        seconds: each row's length of speech.  # (N,)
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


def label_segments(count: int, positions: Sequence[int], clusters: np.ndarray) -> list[str]:
    """A label per segment (``""`` for one not clustered), clusters named ``S1``, ``S2``, …
    by the first segment they label."""
    chosen: dict[int, int] = {k: int(c) for k, c in zip(positions, clusters, strict=True)}
    names: dict[int, str] = {}
    out = []
    for k in range(count):
        c = chosen.get(k)
        if c is not None and c not in names:
            names[c] = f"S{len(names) + 1}"
        out.append(names[c] if c is not None else "")
    return out


#: Windows embedded per call: their audio (26 MB) is all a run holds at once.
EMBED_BATCH = 256


def diarize(
    audio: np.ndarray | Iterable[np.ndarray],
    segments: Sequence[TranscriptSegment],
    encoder: VoiceEncoder,
    threshold: float = THRESHOLD,
    min_seconds: float = MIN_SECONDS,
) -> list[str]:
    """A speaker label per segment of ``segments`` (in their order).

    Args:
        audio: the video's audio, whole or in consecutive pieces (:func:`~vidagent.media.
            iter_audio`, so that an hour's 230 MB is never held).  # (S,) float32 at SAMPLE_RATE
    """
    windows = speech_windows(segments)
    order = sorted(range(len(windows)), key=lambda i: windows[i][1])
    spans = audio_spans(
        [audio] if isinstance(audio, np.ndarray) else audio,
        [windows[i][1:] for i in order],
        SAMPLE_RATE,
    )
    found: list[np.ndarray] = []  # (B, D) each, in `order`
    while batch := list(itertools.islice(spans, EMBED_BATCH)):
        found.append(encoder.embed(batch))
    embedded = np.concatenate(found) if found else np.zeros((0, 0), np.float32)
    vectors = np.empty_like(embedded)
    vectors[order] = embedded  # back in the windows' order
    positions, vectors = segment_vectors(len(segments), windows, vectors)
    seconds = np.array([segments[k].t1 - segments[k].t0 for k in positions])
    clusters = cluster(vectors, seconds, threshold, min_seconds)
    return label_segments(len(segments), positions, clusters)


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


#: The note of a run where the voice encoder is not installed (the demo's quick setup).
NOT_INSTALLED = "not labelled: pip install 'vidagent[speakers]'"


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
        self._encoder: VoiceEncoder | None = None

    def warm(self, ctx: IngestContext) -> None:
        """Load the voice encoder (torch's import and the weights: 2-3 s on 2 cores) while
        transcription runs, when the stage is on and installed and the video has sound (a
        silent video's run needs no encoder)."""
        from vidagent.models import voices

        if ctx.settings.speakers != "off" and ctx.video.has_audio and voices.available():
            self._encoder = self._encoder or voices.VoiceEncoder()

    def fingerprint(self, settings: Settings) -> str:
        if settings.speakers == "off":
            return "off"
        return f"{settings.speakers}|threshold={self.threshold}|min={self.min_seconds}"

    def pending(self, ctx: IngestContext) -> list[ClipRow]:
        """Every clip while the stored labels were made by another fingerprint or from another
        transcript (the work is per video); none when the setting is off, or while the voice
        encoder is not installed (asked again at every run, so installing it labels the video
        at the next index or question)."""
        from vidagent.models import voices

        if ctx.settings.speakers == "off":
            self.note = "off (settings.speakers)"
            return []
        if not voices.available():  # nothing can be labelled: no work, no progress bar
            self.note = NOT_INSTALLED
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
        audio = self._audio(ctx) if segments else None
        if audio is None:
            self.note = "no speech" if ctx.video.has_audio else "no audio track"
            labelled: list[TranscriptSegment] = []
        else:
            self._encoder = self._encoder or voices.VoiceEncoder()
            labels = diarize(audio, segments, self._encoder, self.threshold, self.min_seconds)
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

    def _audio(self, ctx: IngestContext) -> Iterator[np.ndarray] | None:
        """The audio in pieces as it is decoded, or None where the video has none."""
        if not ctx.video.has_audio:
            return None
        pieces = iter_audio(ctx.path, SAMPLE_RATE)
        try:
            first = next(pieces)  # the file is opened, and its stream found, here
        except (NoAudioError, StopIteration):
            return None
        return itertools.chain([first], pieces)

    def estimate(self, info: VideoInfo, clips: int, settings: Settings) -> StageEstimate:
        from vidagent.models import voices

        est = StageEstimate(self.name, None, self.fingerprint(settings))
        if settings.speakers == "off":
            est.notes.append("off (settings.speakers)")
        elif not voices.available():
            est.notes.append(NOT_INSTALLED)
        elif not info.has_audio:
            est.notes.append("no audio track")
        else:
            # the encoder loads beside transcription: 1.8 CPU seconds of that stretch
            est.measured(1.8, info.duration * REAL_TIME_FACTOR)
        return est


def _with(segment: TranscriptSegment, speaker: str) -> TranscriptSegment:
    from dataclasses import replace

    return replace(segment, speaker=speaker)
