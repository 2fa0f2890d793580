"""Two generated clips for the citation questions, made reproducibly from espeak-ng and OpenCV.

The three real clips (``tests/realmedia.py``) are what the tests use; these two are not used by
any test, so questions about them (part ``after`` of ``tests/data/citations/questions.jsonl``)
are about videos nothing in the project was tuned on. Both are built the same way: each line of
speech is synthesised alone by espeak-ng (fixed voice, speed and pitch), its silence trimmed,
and placed at a scheduled time in one mono 22.05 kHz track; the picture is drawn frame by frame
with OpenCV; PyAV writes H.264 (libx264, one thread) and AAC into an MP4. The same espeak-ng,
PyAV and OpenCV give the same file (espeak-ng 1.51, PyAV 18.1 and the project's OpenCV 4.14:
md5 ``90c63957...`` countdown, ``a2c2fd0b...`` garden; OpenCV 5 draws other fonts).

- ``countdown`` (8.0 s, 640x360, 25 fps): a voice (espeak-ng ``en-us``) counts "Ten, nine,
  ..., one, lift off!"; the picture is a dark blue sky with a red rocket on a grey launch pad
  and the number being said in large white digits, then "LIFT OFF!" in yellow while the rocket
  rises. "lift off" is said from 6.90 s to about 7.5 s (:data:`COUNTDOWN_SPEECH`; the CLI
  prints the spoken intervals measured from the written file's decoded audio).
- ``garden`` (60.0 s, 640x360, 25 fps): a weekly update of a (made-up) garden club in three
  voices (``en-us`` host, ``en-us+f3`` planting report, ``en-gb-scotland`` meeting notice),
  each part over a text card with its own background colour (:data:`GARDEN_CARDS`).

Usage::

    python benchmarks/clips.py countdown countdown.mp4
    python benchmarks/clips.py garden garden.mp4

Needs the ``espeak-ng`` program (Debian package ``espeak-ng``) and the project's PyAV, OpenCV
and numpy.
"""

from __future__ import annotations

import argparse
import fractions
import shutil
import subprocess
import sys
import tempfile
import wave
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

RATE = 22050  # espeak-ng's own sample rate
FPS = 25
W, H = 640, 360

# (start s, espeak-ng voice, text): when each line of speech begins.
COUNTDOWN_SPEECH: list[tuple[float, str, str]] = [
    *[
        (round(0.40 + 0.62 * i, 2), "en-us", word)
        for i, word in enumerate(
            ["Ten", "nine", "eight", "seven", "six", "five", "four", "three", "two", "one"]
        )
    ],
    (6.90, "en-us", "lift off!"),
]
COUNTDOWN_SECONDS = 8.0

GARDEN_SECONDS = 60.0
_HOST, _MARIA, _ANGUS = "en-us", "en-us+f3", "en-gb-scotland"
GARDEN_SPEECH: list[tuple[float, str, str]] = [
    (1.0, _HOST, "Welcome to the Riverside Garden Club weekly update."),
    (5.0, _HOST, "I am your host, Paul."),
    (13.0, _MARIA, "This is Maria with the planting report."),
    (17.0, _MARIA, "Our tomatoes go into the ground after the fifteenth of May."),
    (22.0, _MARIA, "The pumpkins are already growing next to the old shed."),
    (28.0, _ANGUS, "Angus here, with the meeting notice."),
    (
        31.5,
        _ANGUS,
        "The next meeting is on Thursday at seven in the evening, in room four of the library.",
    ),
    (41.0, _MARIA, "Please bring your own gloves and a trowel."),
    (45.5, _MARIA, "Tea and biscuits will be served after the meeting."),
    (53.0, _HOST, "That is all for this week. Goodbye, and happy gardening!"),
]
# (start s, end s, background BGR, lines of text): the text cards.
GARDEN_CARDS: list[tuple[float, float, tuple[int, int, int], list[str]]] = [
    (0.0, 12.0, (40, 110, 30), ["RIVERSIDE GARDEN CLUB", "Weekly update"]),  # dark green
    (12.0, 27.0, (110, 40, 100), ["PLANTING REPORT", "Tomatoes: after May 15"]),  # purple
    (27.0, 40.0, (140, 60, 20), ["NEXT MEETING", "Thursday 7 pm", "Library, Room 4"]),  # blue
    (40.0, 52.0, (0, 120, 240), ["PLEASE BRING", "Gloves and a trowel"]),  # orange
    (52.0, 60.0, (30, 30, 30), ["THANK YOU", "See you on Thursday"]),  # near black
]


def _say(text: str, voice: str) -> np.ndarray:
    """One line of speech from espeak-ng as float32 samples, leading and trailing silence cut."""
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng is not installed (Debian: apt-get install espeak-ng)")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "say.wav"
        subprocess.run(
            [exe, "-v", voice, "-s", "160", "-p", "50", "-a", "120", "-w", str(out), text],
            check=True,
            capture_output=True,
        )
        with wave.open(str(out)) as w:
            if w.getframerate() != RATE or w.getsampwidth() != 2 or w.getnchannels() != 1:
                raise RuntimeError(f"espeak-ng wrote an unexpected WAV format: {w.getparams()}")
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    audio = pcm.astype(np.float32) / 32768.0
    loud = np.flatnonzero(np.abs(audio) > 0.01)
    return audio[loud[0] : loud[-1] + 1] if loud.size else audio[:0]


def _track(speech: Sequence[tuple[float, str, str]], seconds: float) -> np.ndarray:
    """The whole audio track: each line placed at its start time."""
    track = np.zeros(round(seconds * RATE), dtype=np.float32)
    for start, voice, text in speech:
        piece = _say(text, voice)
        i = round(start * RATE)
        if i + piece.size > track.size:
            raise ValueError(f"{text!r} runs past the clip's end")
        track[i : i + piece.size] += piece
    return np.clip(track, -1.0, 1.0)


def speech_intervals(audio: np.ndarray, rate: int, gap: float = 0.12) -> list[tuple[float, float]]:
    """Where the track is not silent: 10 ms frames over -40 dBFS, gaps under ``gap`` s closed."""
    hop = rate // 100
    n = audio.size // hop
    rms = np.sqrt(np.mean(audio[: n * hop].reshape(n, hop) ** 2, axis=1))
    on = rms > 0.01
    spans: list[list[float]] = []
    for k in np.flatnonzero(on):
        t0, t1 = k / 100, (k + 1) / 100
        if spans and t0 - spans[-1][1] < gap:
            spans[-1][1] = t1
        else:
            spans.append([t0, t1])
    return [(round(a, 2), round(b, 2)) for a, b in spans]


def _write(
    path: Path, seconds: float, draw: Callable[[float], np.ndarray], audio: np.ndarray
) -> None:
    import av

    n_frames = round(seconds * FPS)
    with av.open(str(path), "w", format="mp4") as out:
        out.metadata.clear()
        v = out.add_stream("libx264", rate=FPS, options={"crf": "20", "preset": "medium"})
        v.width, v.height, v.pix_fmt = W, H, "yuv420p"
        v.thread_count = 1
        v.codec_context.thread_type = "NONE"
        a = out.add_stream("aac", rate=RATE)
        a.layout = "mono"
        for i in range(n_frames):
            frame = av.VideoFrame.from_ndarray(draw(i / FPS), format="bgr24")
            frame.pts = i
            frame.time_base = fractions.Fraction(1, FPS)
            for packet in v.encode(frame):
                out.mux(packet)
        for packet in v.encode():
            out.mux(packet)
        block = 1024
        for j in range(0, audio.size, block):
            chunk = audio[j : j + block]
            sound = av.AudioFrame.from_ndarray(chunk[None, :], format="flt", layout="mono")
            sound.sample_rate = RATE
            sound.pts = j
            sound.time_base = fractions.Fraction(1, RATE)
            for packet in a.encode(sound):
                out.mux(packet)
        for packet in a.encode():
            out.mux(packet)


def decoded_audio(path: str | Path) -> tuple[np.ndarray, int]:
    """A file's first audio stream decoded to mono float32, as a player would play it."""
    import av

    chunks = []
    with av.open(str(path)) as f:
        stream = f.streams.audio[0]
        rate = stream.rate
        first = None
        for frame in f.decode(stream):
            if first is None and frame.pts is not None:
                first = float(frame.pts * frame.time_base)
            chunks.append(frame.to_ndarray().reshape(-1).astype(np.float32))
    audio = np.concatenate(chunks)
    if first and first > 0:  # a stream starting late: pad so index 0 is t = 0
        audio = np.concatenate([np.zeros(round(first * rate), np.float32), audio])
    elif first and first < 0:  # encoder priming before t = 0: drop it
        audio = audio[round(-first * rate) :]
    return audio, rate


def _text(
    img: np.ndarray,
    text: str,
    y: int,
    scale: float,
    colour: tuple[int, int, int],
    thick: int,
    cx: int = W // 2,
) -> None:
    import cv2

    font = cv2.FONT_HERSHEY_DUPLEX
    (tw, _), _ = cv2.getTextSize(text, font, scale, thick)
    cv2.putText(img, text, (cx - tw // 2, y), font, scale, colour, thick, cv2.LINE_AA)


def countdown(path: str | Path) -> list[tuple[float, float]]:
    """Write the 8 s countdown clip; returns the spoken intervals measured from its audio."""
    import cv2

    starts = [s for s, _, _ in COUNTDOWN_SPEECH]
    labels = [str(10 - i) for i in range(10)] + ["LIFT OFF!"]

    def draw(t: float) -> np.ndarray:
        img = np.zeros((H, W, 3), np.uint8)
        img[:] = (90, 30, 10)  # dark blue sky (BGR)
        cv2.rectangle(img, (0, 320), (W, H), (60, 60, 60), -1)  # grey launch pad
        k = max((i for i, s in enumerate(starts) if s <= t), default=-1)
        rise = 0 if t < starts[-1] else int((t - starts[-1]) * 120)
        x, base = 500, 320 - rise
        body = np.array(
            [
                [x - 22, base],
                [x + 22, base],
                [x + 22, base - 130],
                [x, base - 175],
                [x - 22, base - 130],
            ],
            np.int32,
        )
        cv2.fillPoly(img, [body], (30, 30, 210))  # red rocket
        cv2.circle(img, (x, base - 95), 11, (230, 230, 230), -1)  # its window
        if rise:
            flame = np.array([[x - 16, base], [x + 16, base], [x, base + 40]], np.int32)
            cv2.fillPoly(img, [flame], (0, 160, 255))
        if 0 <= k < 10:
            _text(img, labels[k], 230, 6.0, (255, 255, 255), 12, cx=240)
        elif k == 10:
            _text(img, labels[k], 200, 2.2, (0, 230, 255), 5, cx=230)
        return img

    audio = _track(COUNTDOWN_SPEECH, COUNTDOWN_SECONDS)
    _write(Path(path), COUNTDOWN_SECONDS, draw, audio)
    return speech_intervals(*decoded_audio(path))


def garden(path: str | Path) -> list[tuple[float, float]]:
    """Write the 60 s garden club clip; returns the spoken intervals measured from its audio."""
    import cv2

    def draw(t: float) -> np.ndarray:
        img = np.zeros((H, W, 3), np.uint8)
        _, _, colour, lines = next(c for c in GARDEN_CARDS if c[0] <= t < c[1])
        img[:] = colour
        cv2.rectangle(img, (20, 20), (W - 20, H - 20), (255, 255, 255), 3)
        _text(img, lines[0], 110, 1.5, (255, 255, 255), 3)
        for j, line in enumerate(lines[1:]):
            _text(img, line, 190 + 60 * j, 1.3, (255, 255, 255), 2)
        if lines[0] == "PLANTING REPORT":  # a tomato in the corner
            cv2.circle(img, (80, 290), 28, (20, 20, 240), -1)
            cv2.circle(img, (80, 290), 28, (255, 255, 255), 2)
        return img

    audio = _track(GARDEN_SPEECH, GARDEN_SECONDS)
    _write(Path(path), GARDEN_SECONDS, draw, audio)
    return speech_intervals(*decoded_audio(path))


MAKERS = {"countdown": countdown, "garden": garden}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("clip", choices=sorted(MAKERS))
    parser.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    spans = MAKERS[args.clip](args.out)
    print(f"{args.out}: speech (s, from the decoded audio, 10 ms frames over -40 dBFS):")
    for t0, t1 in spans:
        print(f"  {t0:6.2f} - {t1:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
