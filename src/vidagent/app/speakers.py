"""Who speaks: a video's speaker labels with their talk time, and the names a user gives them.

The speakers stage (:mod:`vidagent.ingest.speakers`) labels each transcript segment ``S1``,
``S2``, …; ``vidagent speakers VIDEO rename S1 "Dr Lee"`` stores a name for a label in the
video's ``"speakers"`` artefact with key ``"names"`` (``{label: name}``), which indexing never
rewrites. Where a speaker is shown beside the index (``show``, search hits, citations, the web
UI's clip table) it reads ``S1 (Dr Lee)``, or the label alone; subtitles and evidence bundles,
which a person reads without the labels, give the name in the label's place
(:func:`with_names`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vidagent.app.core import SessionCore
from vidagent.exceptions import ConfigError

if TYPE_CHECKING:
    from vidagent.library import Library
    from vidagent.library.schema import TranscriptSegment

NAMES_KEY = "names"
#: why a stream's speakers are neither listed nor named (:mod:`vidagent.ingest.live`)
STREAM_NOTE = (
    "it is a stream: each window labels its voices on its own (S1 of one window need not be S1 "
    "of the next), so its speakers are not listed or named"
)


@dataclass(frozen=True)
class Speaker:
    """One speaker of a video: its label, the name a user gave it, and its talk time."""

    label: str
    name: str
    seconds: float
    segments: int

    @property
    def shown(self) -> str:
        """``S1 (Dr Lee)``, or ``S1`` without a name."""
        return shown(self.label, self.name)


@dataclass(frozen=True)
class SpeakerList:
    """``speakers``: a video's speakers, most talk first; ``labelled`` is False when the
    speakers stage has not run on it (or was off), or it is a stream (``note`` says why)."""

    video_id: str
    speakers: list[Speaker]
    labelled: bool
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "video_id": self.video_id,
            "labelled": self.labelled,
            "note": self.note,
            "speakers": [
                {"label": s.label, "name": s.name, "seconds": s.seconds, "segments": s.segments}
                for s in self.speakers
            ],
        }


def shown(label: str, name: str) -> str:
    """How a speaker reads: ``S1 (Dr Lee)``, or the label alone."""
    return f"{label} ({name})" if name else label


def names(library: Library, video_id: str) -> dict[str, str]:
    """The names given to a video's labels (``{label: name}``)."""
    stored = library.artifact(video_id, "speakers", NAMES_KEY)
    return {str(k): str(v) for k, v in (stored.data if stored else {}).items()}


def with_names(
    library: Library, video_id: str, segments: Sequence[TranscriptSegment]
) -> list[TranscriptSegment]:
    """``segments`` with each labelled speaker given by the name its label was given, where
    one was (``"S1"`` → ``"Dr Lee"``): what subtitles and evidence bundles show."""
    given = names(library, video_id)
    return [
        dataclasses.replace(s, speaker=given[s.speaker]) if s.speaker in given else s
        for s in segments
    ]


def speakers(core: SessionCore, ref: str) -> SpeakerList:
    """A video's speakers with their talk time, most first.

    Raises:
        VideoNotFoundError: no such video.
    """
    lib = core.existing_library()
    video = lib.get_video(ref)
    if "watch" in video.stages:
        return SpeakerList(video.video_id, [], False, STREAM_NOTE)
    stored = lib.artifact(video.video_id, "speakers")
    given = names(lib, video.video_id)
    talk: dict[str, Any] = stored.data.get("speakers", {}) if stored else {}
    found = [
        Speaker(label, given.get(label, ""), float(t["seconds"]), int(t["segments"]))
        for label, t in talk.items()
    ]
    found.sort(key=lambda s: (-s.seconds, s.label))
    return SpeakerList(video.video_id, found, stored is not None)


#: A speaker's label as the speakers stage gives it (any case).
LABEL = re.compile(r"[sS]\d+")
#: A name's most characters: it heads every line a speaker says in subtitles and transcripts.
NAME_CHARS = 80
#: Joiners a name may hold though not printable: an emoji sequence's (👩‍⚕️), a script's.
_JOINERS = frozenset("\u200c\u200d")


def rename(core: SessionCore, ref: str, label: str, name: str) -> SpeakerList:
    """Give ``label`` a ``name`` (an empty name removes it).

    Raises:
        VideoNotFoundError: no such video.
        ConfigError: the video has no speaker ``label`` (the message lists them), the name
            holds a character that is not printable (a control character; a joiner is
            taken) or ``<``/``>`` (markup in SubRip, which shows ``<b>`` as bold), is longer
            than :data:`NAME_CHARS`, or it is another speaker's name or label
            (``--speaker`` would find one of them only).
    """
    from vidagent.library.schema import Artifact

    listed = speakers(core, ref)
    if listed.note:
        raise ConfigError(f"{ref}: {listed.note}")
    labels = [s.label for s in listed.speakers]
    wanted = label.strip().upper()
    if wanted not in labels:
        if listed.labelled:  # the speakers stage ran, and heard nobody
            none = "none: nobody speaks in it"
        else:
            none = "none (index it with the speakers stage first)"
        have = ", ".join(sorted(labels)) or none
        raise ConfigError(f"{ref} has no speaker {label!r}; its speakers: {have}")
    name = " ".join(name.split())
    # printed by commands and written into subtitles
    if not all(ch.isprintable() or ch in _JOINERS for ch in name):
        raise ConfigError(f"a speaker's name is printable text, not {name!r}")
    if "<" in name or ">" in name:
        raise ConfigError(f"a speaker's name holds no < or > (markup in subtitles): {name!r}")
    if len(name) > NAME_CHARS:
        raise ConfigError(f"a speaker's name is at most {NAME_CHARS} characters, not {len(name)}")
    lib = core.existing_library()
    with lib.write_lock():  # two renames at once (two HTTP requests) each keep their name
        given = names(lib, listed.video_id)
        taken = {n.casefold(): k for k, n in given.items() if k != wanted}
        if name and name.casefold() in taken:
            raise ConfigError(
                f"{name!r} already names {taken[name.casefold()]} in {ref}; give each speaker "
                "a name of its own"
            )
        other = next((k for k in labels if k != wanted and k.casefold() == name.casefold()), "")
        if name and other:  # `--speaker S3` would find one of them only
            raise ConfigError(
                f"{name!r} is the label of another speaker ({other}) in {ref}; give a name that "
                "is not a label"
            )
        if name and LABEL.fullmatch(name) and name.upper() != wanted:
            # no speaker's label here, but one in another video (a search of several by
            # `--speaker S3` finds both), or here once the video is diarized again
            raise ConfigError(
                f"{name!r} reads as a speaker's label (S1, S2, …); give a name that is not one"
            )
        if name:
            given[wanted] = name
        else:
            given.pop(wanted, None)
        lib.put_artifact(Artifact(listed.video_id, "speakers", NAMES_KEY, data=given))
    return speakers(core, ref)


def label_of(library: Library, video_id: str, who: str) -> str | None:
    """The label ``who`` means in a video: a label (``s1`` too) or a given name, any case;
    None when the video has no such speaker."""
    wanted = " ".join(who.split()).casefold()
    for label, name in names(library, video_id).items():
        if name.casefold() == wanted:
            return label
    return who.strip().upper() if who.strip() else None


def spans_of(
    library: Library, video_ids: Sequence[str], who: str
) -> dict[str, list[tuple[float, float]]]:
    """Where ``who`` speaks, per video: their segments' ``(t0, t1)``."""
    out: dict[str, list[tuple[float, float]]] = {}
    for vid in video_ids:
        label = label_of(library, vid, who)
        out[vid] = [(s.t0, s.t1) for s in library.transcript(vid) if label and s.speaker == label]
    return out


def who_speaks(
    segments: Sequence[TranscriptSegment], given: dict[str, str], t0: float, t1: float
) -> list[str]:
    """The speakers (as shown) of the segments overlapping ``[t0, t1)``, in order of speech."""
    out: list[str] = []
    for s in segments:
        if s.speaker and s.t0 < t1 and s.t1 > t0:
            label = shown(s.speaker, given.get(s.speaker, ""))
            if label not in out:
                out.append(label)
    return out


def check_known(library: Library, video_ids: Sequence[str], who: str) -> None:
    """Raise unless some video of ``video_ids`` has the speaker ``who`` (a label or a given
    name): a search for a speaker nobody is finds nothing for a reason the user should read.

    Raises:
        ConfigError: no such speaker (for one video, the message lists its speakers).
    """
    had: list[str] = []
    for vid in video_ids:
        stored = library.artifact(vid, "speakers")
        labels = sorted(stored.data.get("speakers", {})) if stored else []
        if label_of(library, vid, who) in labels:
            return
        had = labels
    if len(video_ids) == 1:
        have = ", ".join(shown(label, names(library, video_ids[0]).get(label, "")) for label in had)
        name = library.get_video(video_ids[0]).name  # as the user named it, not its id
        raise ConfigError(
            f"{name} has no speaker {who!r}; its speakers: "
            f"{have or 'none (index it with the speakers stage first)'}"
        )
    raise ConfigError(f"none of the {len(video_ids)} videos searched has a speaker {who!r}")
