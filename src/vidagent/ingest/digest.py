"""The extractive digest: a global summary made of sentences the index already holds.

The embedded smoke-test llm (SmolLM2-135M) cannot summarise: asked VideoAgent2's prompt it
repeats itself and echoes the prompt ("4-second clips", "camera wearer"). So with that llm (or
with ``summary = "extractive"``) the summarize stage writes this digest instead, and no sentence
of it is written by a model:

**Candidates**, each a verbatim piece of one indexed text with the span it came from:

- speech: the transcript segments (or, where the video has none, each clip's transcript), cut
  into sentences at ``.``, ``!`` or ``?`` followed by a space;
- on-screen text: each line of a clip's ``ocr_text``; the same line in consecutive clips is one
  candidate over their joint span;
- shots: what a clip's caption reports seeing. Of the perception describer's caption, the
  sentences its stored facts list as reporting something found
  (:attr:`~vidagent.library.schema.DescriberFacts.report`: people seen, the picture, shot cuts),
  so its label, its quotes of speech and on-screen text, which repeat the two sources above,
  and its sentences of absence, such as "No speech.", are left out without reading the prose;
  a describer caption written before its facts were stored (schema version 3; re-indexing
  writes them) gives none. Of any other caption, every sentence.

Identical texts are kept once, at their first span; a text with fewer than
:data:`MIN_LETTERS` letters (OCR noise such as "cC") is no candidate.

**Selection** (Maximal Marginal Relevance, Carbonell & Goldstein 1998) over the ``embed`` role's
L2-normalised vectors: the centroid ``c`` is the mean vector of the clips' texts (what the embed
stage embeds; its stored vectors are reused, which on the narrated 3-minute clip spares 5,179 of
the 8,095 tokens the digest would embed, 1.3 of 2.1 s), and the next sentence is the one maximising
``LAMBDA * cos(s, c) - (1 - LAMBDA) * max cos(s, chosen)``, among those whose cosine to every
chosen sentence is below :data:`REDUNDANT` (0.9). Selection stops at :func:`budget` sentences or
words; a sentence that would overrun the word budget is skipped (the first is always taken).
Shot sentences, and on-screen lines, each take at most a quarter of the sentences (rounded up)
while candidates of another source are left: the describer's reports are long and alike, so the
centroid of the clips' texts (which include them) leans toward them, and OCR lines are short and
sometimes noise, which no redundancy penalty holds back; what a person wants first from a
digest is what is said. (On the narrated ``wannaworktogether.mp4`` without the quotas, 8 of 8
sentences were shot reports and OCR lines, one of them OCR noise, and 1 was speech.)

**Output**: the chosen sentences in time order, each on its own line prefixed by its start as
``[MM:SS]``, under :data:`HEADER`, which says what the digest is.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vidagent.ingest.base import text_hash
from vidagent.ingest.embed import clip_text
from vidagent.library.readable import readable_lines
from vidagent.models.perception import LABEL

if TYPE_CHECKING:
    from vidagent.library import ClipRow
    from vidagent.library.schema import TranscriptSegment
    from vidagent.models.client import Client

HEADER = (
    "Extractive digest of the indexed speech, on-screen text and shots "
    "(no language model wrote this):"
)
#: Weight of relevance (to the centroid) against redundancy (to the chosen) in MMR.
LAMBDA = 0.7
#: A sentence at least this close (cosine) to a chosen one is never chosen.
REDUNDANT = 0.9
#: Letters a candidate needs (OCR reads stray marks as one- or two-letter lines).
MIN_LETTERS = 3
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Candidate:
    """A verbatim piece of the index and where it came from."""

    t0: float
    t1: float
    text: str
    source: str  # "speech" | "text" | "shot"


def budget(duration: float) -> tuple[int, int]:
    """``(sentences, words)``: 8 and 120 up to five minutes, one sentence and 15 words more per
    further five minutes, at most 24 and 360."""
    sentences = min(24, 8 + int(max(0.0, duration - 300.0) // 300))
    return sentences, 15 * sentences


def sentences(text: str) -> list[str]:
    """``text`` cut after ``.``, ``!`` or ``?`` followed by whitespace; each piece is verbatim."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def candidates(clips: list[ClipRow], segments: list[TranscriptSegment]) -> list[Candidate]:
    """Every candidate sentence in time order, identical texts kept once (the first)."""
    found: list[Candidate] = []
    if segments:
        found += [Candidate(s.t0, s.t1, x, "speech") for s in segments for x in sentences(s.text)]
    else:
        found += [
            Candidate(c.t0, c.t1, x, "speech") for c in clips for x in sentences(c.transcript)
        ]
    found += _screen_text(clips)
    found += [Candidate(c.t0, c.t1, x, "shot") for c in clips for x in shot_sentences(c)]
    seen: set[str] = set()
    out = []
    for cand in sorted(found, key=lambda x: (x.t0, x.t1)):
        if cand.text not in seen and sum(ch.isalpha() for ch in cand.text) >= MIN_LETTERS:
            seen.add(cand.text)
            out.append(cand)
    return out


def shot_sentences(clip: ClipRow) -> list[str]:
    """What the clip's caption reports seeing, verbatim (module docstring: shots)."""
    facts = clip.describer_facts()
    if facts is not None:
        return list(facts.report)
    if clip.caption.startswith(LABEL):  # the describer's, from before its facts were stored
        return []
    return sentences(clip.caption)


def _screen_text(clips: list[ClipRow]) -> list[Candidate]:
    """On-screen lines; a line shown in consecutive clips is one candidate over their span."""
    out: list[Candidate] = []
    open_: dict[str, int] = {}  # line -> index in out of its run that the last clip extended
    for c in clips:
        lines = set(readable_lines(c.ocr_text))  # a misreading is no summary sentence
        for line in sorted(lines):
            at = open_.get(line)
            if at is not None and abs(out[at].t1 - c.t0) < 1e-6:
                out[at] = Candidate(out[at].t0, c.t1, line, "text")
            else:
                open_[line] = len(out)
                out.append(Candidate(c.t0, c.t1, line, "text"))
    return out


def select(
    vectors: np.ndarray,
    centroid: np.ndarray,
    words: list[int],
    limits: tuple[int, int],
    capped: list[np.ndarray] | None = None,
) -> list[int]:
    """Indices MMR picks from ``vectors`` (N, D), L2-normalised, against ``centroid`` (D,).

    Each mask of ``capped`` ((N,) bool, a source) gets at most a quarter of the sentences
    while candidates outside it are left."""
    if len(vectors) == 0:
        return []
    quarter = -(-limits[0] // 4)
    norm = float(np.linalg.norm(centroid))
    relevance = vectors @ (centroid / norm if norm > 0 else centroid)  # (N,)
    closest = np.full(len(vectors), -1.0)  # (N,) max cosine to a chosen sentence
    open_ = np.ones(len(vectors), dtype=bool)
    chosen: list[int] = []
    total = 0
    max_sentences, max_words = limits
    while len(chosen) < max_sentences and open_.any():
        score = LAMBDA * relevance - (1 - LAMBDA) * np.maximum(closest, 0.0)
        full = [m for m in capped or [] if int(m[chosen].sum()) >= quarter]
        allowed = open_ & ~np.logical_or.reduce(full) if full else open_
        best = int(np.argmax(np.where(allowed if allowed.any() else open_, score, -np.inf)))
        open_[best] = False
        if chosen and total + words[best] > max_words:
            continue  # too long for what is left; a shorter one may fit
        chosen.append(best)
        total += words[best]
        closest = np.maximum(closest, vectors @ vectors[best])
        open_ &= closest < REDUNDANT
    return chosen


def stamp(t: float) -> str:
    """``[MM:SS]`` of ``t`` seconds (minutes go past 59 in long videos)."""
    whole = int(t)
    return f"[{whole // 60:02d}:{whole % 60:02d}]"


def digest(
    client: Client,
    clips: list[ClipRow],
    segments: list[TranscriptSegment],
    duration: float,
    *,
    embed_text: str = "caption+speech+text",
    known: Mapping[str, np.ndarray] | None = None,
) -> tuple[str, dict[str, Any]]:
    """The digest's text and data (``method``, the chosen ``sentences``, the ``candidates``
    count); ``""`` when the index holds no text at all.

    The clips' texts are made by ``embed_text`` (the setting the embed stage follows);
    ``known`` maps a text's :func:`~vidagent.ingest.base.text_hash` to the ``client``'s vector
    of it (the embed stage's stored vectors), so those texts are not embedded twice."""
    pool = candidates(clips, segments)
    data: dict[str, Any] = {"method": "extractive", "sentences": [], "candidates": len(pool)}
    if not pool:
        return "", data
    texts = [t for t in (clip_text(c, embed_text) for c in clips) if t.strip()]
    vectors, clip_vectors = _embed(client, [c.text for c in pool], texts, known or {})
    centroid = (clip_vectors if texts else vectors).mean(axis=0)
    limits = budget(duration or max(c.t1 for c in clips))
    # The pool is in time order (speech sentences of one segment in spoken order).
    capped = [np.array([c.source == s for c in pool]) for s in ("shot", "text")]  # (N,) bool
    picked = sorted(select(vectors, centroid, [len(c.text.split()) for c in pool], limits, capped))
    chosen = [pool[i] for i in picked]
    data["sentences"] = [asdict(c) for c in chosen]
    return "\n".join([HEADER, *(f"{stamp(c.t0)} {c.text}" for c in chosen)]), data


def _embed(
    client: Client, pool: list[str], texts: list[str], known: Mapping[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """Vectors of the ``pool`` sentences (N, D) and of the clips' ``texts`` (K, D), in one call
    for all but the texts ``known`` holds."""
    hashes = [text_hash(t) for t in texts]
    missing = [t for t, h in zip(texts, hashes, strict=False) if h not in known]
    embedded = client.embed(pool + missing).vectors  # (N + M, D)
    fresh = dict(zip(missing, embedded[len(pool) :], strict=False))
    clip_vectors = [
        known[h] if h in known else fresh[t] for t, h in zip(texts, hashes, strict=False)
    ]
    dim = embedded.shape[1]
    return embedded[: len(pool)], np.array(clip_vectors, np.float32).reshape(-1, dim)
