"""AgentCVR's real environment: the visual and audio sub-agents over the question's videos.

Each ``observe`` is one child run (``visual_agent``): frames of every target by the published
rule (:mod:`vidagent.tools.cvr.frames`), one request to the ``tool_vlm`` role (which follows
``vlm`` unless set; offline, the perception describer) with the frame-mapping header, the focus
prompt and a ``Frame n (Video v, t=12.3s)`` label before each image; its ``<think>`` is dropped.
Each ``get_caption`` is one child run (``audio_agent``): the Library's transcript when the video's
``transcribe`` stage covered it and the strategy may read the index, else the ``asr`` role on
the interval (:mod:`vidagent.tools.cvr.audio`). The child's ``source`` phase records which.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vidagent.agents.cvr.inputs import CvrInput
from vidagent.agents.cvr.parse import strip_think
from vidagent.agents.cvr.protocol import CvrToolError, CvrVideo, ObserveTarget
from vidagent.exceptions import MediaError, NoAudioError
from vidagent.models.base import ChatRequest, ImagePart, Message
from vidagent.prompts import load_prompt
from vidagent.tools.base import Evidence
from vidagent.tools.cvr import audio as cvr_audio
from vidagent.tools.cvr import frames as cvr_frames

if TYPE_CHECKING:
    from vidagent.agents.run import Run


@dataclass
class Source:
    """What the environment knows of one master-facing video."""

    video: CvrVideo
    given: CvrInput
    path: str = ""
    fps: float = 0.0
    frame_count: int = 0
    pieces: list[cvr_frames.Piece] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    indexed_speech: bool = False

    def clip_time(self, t: float) -> float:
        """A source time in the clip's timeline (the nearest piece's)."""
        best = min(
            self.pieces,
            key=lambda p: (
                0
                if p.src_start <= t <= p.src_end
                else min(abs(t - p.src_start), abs(t - p.src_end))
            ),
        )
        inside = min(max(t, best.src_start), best.src_end)
        return inside - best.src_start + best.clip_start


@dataclass
class Shot:
    """One target's frames: ``(label, image)`` pairs and the mapping line."""

    line: str
    labels: list[str]
    images: list[ImagePart]
    evidence: Evidence | None = None


class VideoEnvironment:
    """The visual and audio sub-agents over a question's videos (a :class:`CvrEnvironment`).

    Args:
        run: the master's run (child runs hang under it; its meter counts frames).
        inputs: Video 1, Video 2, ... in order.
        use_index: read indexed transcripts and show summaries when the Library has them.
        long_side: frames' long side in pixels (360 as published).
        visual_max_tokens: the visual agent's reply cap (``None``: the model's own).
    """

    def __init__(
        self,
        run: Run,
        inputs: Sequence[CvrInput],
        *,
        use_index: bool = False,
        long_side: int = cvr_frames.LONG_SIDE,
        visual_max_tokens: int | None = None,
    ) -> None:
        self.run, self.use_index, self.long_side = run, use_index, long_side
        self.visual_max_tokens = visual_max_tokens
        self.sources = [self._source(i + 1, given) for i, given in enumerate(inputs)]
        self.videos: Sequence[CvrVideo] = [s.video for s in self.sources]
        self.last_frames = 0
        self.last_calls = 0
        self.last_note = ""
        self.last_evidence: tuple[Evidence, ...] = ()
        self._audio: dict[str, Any] = {}
        self._audio_lock = threading.Lock()

    # -- the videos ---------------------------------------------------------------------------

    def _source(self, index: int, given: CvrInput) -> Source:
        if given.folder is not None:
            files = cvr_frames.folder_files(given.folder)
            video = CvrVideo(index, None, total_frames=len(files), has_audio=False)
            return Source(video, given, path=given.folder, files=files)
        assert given.video_id is not None
        record = self.run.index.video(given.video_id)
        start, _ = self.run.index.span(record.video_id)
        pieces = cvr_frames.clip_pieces(given.spans, record.duration, start)
        if not pieces:
            raise MediaError(
                record.source,
                f"the clip {list(given.spans)} lies outside the video ({record.duration:.1f}s)",
            )
        summary = self.run.index.global_summary(record.video_id) if self.use_index else ""
        length = sum(p.length for p in pieces)
        video = CvrVideo(
            index, round(length, 3), has_audio=record.has_audio, summary=summary or None
        )
        indexed = self.use_index and "transcribe" in record.stages
        return Source(
            video,
            given,
            path=record.source,
            fps=record.fps,
            frame_count=max(1, round(record.duration * record.fps)),
            pieces=pieces,
            indexed_speech=indexed,
        )

    def describe(self) -> list[dict[str, Any]]:
        """What the trace records of the videos: source, clip spans, audio, index use."""
        return [
            {
                "video_index": s.video.index,
                "source": s.given.label or s.path,
                "spans": [list(x) for x in s.given.spans],
                "frames_based": s.video.frames_based,
                "has_audio": s.video.has_audio,
                "indexed_speech": s.indexed_speech,
                "summary_shown": s.video.summary is not None,
            }
            for s in self.sources
        ]

    # -- observe ------------------------------------------------------------------------------

    def _shot(self, source: Source, target: ObserveTarget, count: int, first: int) -> Shot:
        v = source.video.index
        if source.video.frames_based:
            indices = cvr_frames.folder_indices(target.start, target.end, count, len(source.files))
            images = cvr_frames.folder_images(
                source.files, indices, source.given.boxes, long_side=self.long_side
            )
            line = cvr_frames.folder_mapping_line(
                v, int(target.start), int(target.end), len(images)
            )
            labels = [f"Frame {first + n} (Video {v}, frame {i})" for n, i in enumerate(indices)]
            return Shot(line, labels, images)
        times = cvr_frames.source_times(source.pieces, target.start, target.end, count)
        if source.fps > 0:
            indices = cvr_frames.frame_indices(times, source.fps, source.frame_count)
            at = [i / source.fps for i in indices]
        else:  # no frame rate known: the decoder's nearest frames to the times
            at = list(dict.fromkeys(times))
        images = cvr_frames.video_images(source.path, at, long_side=self.long_side)
        line = cvr_frames.mapping_line(first, first + len(images) - 1, v, target.start, target.end)
        labels = [
            f"Frame {first + n} (Video {v}, t={source.clip_time(t):.1f}s)" for n, t in enumerate(at)
        ]
        assert source.given.video_id is not None
        evidence = Evidence(source.given.video_id, min(at), max(at)) if at else None
        return Shot(line, labels, images, evidence)

    def observe(self, targets: Sequence[ObserveTarget], focus_prompt: str) -> str:
        """The visual agent's reply about the targets' frames (a child run)."""
        client = self.run.models.client("tool_vlm")
        limit = client.capabilities.max_images or sum(t.num_frames for t in targets)
        asked = [t.num_frames for t in targets]
        counts = asked if sum(asked) <= limit else cvr_frames.allocate(limit, asked)
        note = (
            ""
            if counts == asked
            else (
                f"the visual model takes {limit} images: frames per target {asked} became {counts}"
            )
        )
        child = self.run.child(
            "visual_agent",
            focus_prompt=focus_prompt,
            targets=[dataclasses.asdict(t) for t in targets],
        )
        shots: list[Shot] = []
        try:
            for target, count in zip(targets, counts, strict=True):
                if count:
                    first = sum(len(s.images) for s in shots) + 1
                    shots.append(
                        self._shot(self.sources[target.video_index - 1], target, count, first)
                    )
        except MediaError as e:
            raise CvrToolError(f"could not read the frames: {e}") from None
        mapping = "\n".join(s.line for s in shots)
        prompt = load_prompt("cvr_visual").replace("{MAPPING}", mapping)
        prompt = prompt.replace("{FOCUS_PROMPT}", focus_prompt or "Describe what happens.").strip()
        content: list[str | ImagePart] = [prompt]
        for shot in shots:
            for label, image in zip(shot.labels, shot.images, strict=True):
                content += [label, image]
        frames = sum(len(s.images) for s in shots)
        child.phase(
            "frames",
            mapping=mapping,
            frames=frames,
            labels=[x for s in shots for x in s.labels],
            note=note,
        )
        request = ChatRequest(
            (Message("user", tuple(content)),), temperature=0.0, max_tokens=self.visual_max_tokens
        )
        with child.active():
            reply = strip_think(client.chat(request).text)
        child.phase("reply", text=reply)
        self.last_frames, self.last_note, self.last_calls = frames, note, 1
        self.last_evidence = tuple(s.evidence for s in shots if s.evidence is not None)
        self.run.meter.frames += frames
        return reply or "The visual agent returned nothing."

    # -- get_caption --------------------------------------------------------------------------

    def get_caption(self, video_index: int, start: float | None, end: float | None) -> str:
        """The audio agent's ``[t0s - t1s]: text`` lines of the interval (a child run)."""
        source = self.sources[video_index - 1]
        lo = 0.0 if start is None else start
        hi = (source.video.extent or 0.0) if end is None else end
        child = self.run.child("audio_agent", video_index=video_index, start=lo, end=hi)
        self.last_frames, self.last_note, self.last_evidence, self.last_calls = 0, "", (), 0
        if source.video.frames_based or not source.video.has_audio:
            child.phase("source", source="none", reason="no audio track")
            return cvr_audio.no_speech(video_index, round(lo, 2), round(hi, 2))
        lines: list[tuple[float, float, str]] = []
        how = "index" if source.indexed_speech else "asr"
        child.phase("source", source=how)
        with child.active():
            for piece in source.pieces:
                a, b = max(lo, piece.clip_start), min(hi, piece.clip_start + piece.length)
                if b <= a:
                    continue
                src_a, src_b = (
                    a - piece.clip_start + piece.src_start,
                    b - piece.clip_start + piece.src_start,
                )
                for s in self._speech(source, src_a, src_b):
                    shift = piece.clip_start - piece.src_start
                    lines.append((max(s.t0 + shift, a), min(s.t1 + shift, b), s.text))
        text = cvr_audio.caption_text(video_index, lo, hi, lines)
        child.phase("reply", text=text, segments=len(lines))
        return text

    def _speech(self, source: Source, src_a: float, src_b: float) -> list[cvr_audio.Speech]:
        if source.indexed_speech:
            assert source.given.video_id is not None
            rows = self.run.index.transcript(source.given.video_id, src_a, src_b)
            speech = [cvr_audio.Speech(r.t0, r.t1, r.text) for r in rows]
            return cvr_audio.in_window(speech, src_a, src_b)
        try:
            audio = self._waveform(source.path)
        except NoAudioError:
            return []
        except MediaError as e:
            raise CvrToolError(f"could not read the audio: {e}") from None
        asr = self.run.models.client("asr")
        self.last_calls += 1
        return cvr_audio.transcribe_window(asr, audio, src_a, src_b)

    def _waveform(self, path: str) -> Any:
        with self._audio_lock:
            if path not in self._audio:
                self._audio[path] = cvr_audio.load_audio(path)
            return self._audio[path]
