"""Synthetic video scripts (AgentCVR §3.2): schema, validation, JSONL sets, LLM synthesis.

A script is one training environment: a few fictitious videos, each a timeline of
``{start, end, visual, caption}`` events, plus a question, its options and the answer. The
canonical form (one JSON object per line of a set's ``<task>.jsonl``)::

    {"id": "3f2a…", "task": "NC", "question": "…", "options": ["A. Video 1", …],
     "answer": "C", "videos": [{"video_index": 1, "duration": 120.0,
     "timeline": [{"start": 0, "end": 6, "visual": "…", "caption": "…"}]}, …],
     "meta": {"source": "llm" | "template", "model": "…", "prompt_hash": "…",
              "config_index": 7, "config": {…}, "reasoning": "…"}}

Answer formats by task: one letter (NC, CC, PEA, PI, MSR, MOC), sorted letters (BU, e.g.
``"AC"``), an order of video indices (PSS, ``"3->1->2"``), an interval of Video 2 in seconds
(FSA, ``"[53.2, 57.8]"``).

**Synthesis** (``vidagent train scripts --task NC --n 50 --out DIR``) fills the task's Appendix
H.1 prompt (``prompts/cvr_script_<task>.txt``, verbatim from the paper) with one configuration
drawn from small attribute pools (:mod:`.slots`), appends :data:`OUTPUT_FORMAT` — the paper
prints every prompt's "Output JSON Format" section abbreviated, so this suffix (ours) spells out
the canonical schema above — and sends it to the ``llm`` role. The reply's JSON is validated
(:func:`validate`); an invalid reply is asked again with the error (``retries`` times), then the
configuration is recorded in ``<task>.rejects.jsonl`` and the next one is tried. A script whose
content duplicates one already in the set is dropped. Both files are appended line by line and
flushed, so a killed run resumes where it stopped (configurations already kept or rejected are
skipped) and never writes a script twice.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidagent.exceptions import ConfigError

#: task -> (answer format, number of videos; None: 3-6 clips for PSS)
TASKS: dict[str, tuple[str, int | None]] = {
    "MSR": ("letter", 2),
    "MOC": ("letter", 2),
    "PSS": ("order", None),
    "PI": ("letter", 2),
    "NC": ("letter", 4),
    "FSA": ("interval", 2),
    "CC": ("letter", 4),
    "BU": ("multi", 4),
    "PEA": ("letter", 3),
}

OUTPUT_FORMAT = """

### Output JSON Format (exact keys)
Reply with ONE JSON object and nothing else:
{"question": "<question text>",
 "options": ["A. <option>", "B. <option>", ...],
 "answer": "<ANSWER>",
 "reasoning": "<why the answer is correct, citing the videos>",
 "videos": [{"video_index": 1, "duration": <seconds>,
             "timeline": [{"start": <s>, "end": <s>, "visual": "<what is seen>",
                           "caption": "<speech or subtitles, empty if silent>"}]}]}
"""

ANSWER_FORMATS = {
    "letter": "one option letter, e.g. C",
    "multi": "every correct option letter, sorted and concatenated, e.g. AC",
    "order": "the chronological order of the videos by video_index, e.g. 3->1->2; options []",
    "interval": "the matching interval of Video 2 in seconds, e.g. [53.2, 57.8]; options []",
}


class ScriptError(ValueError):
    """A script that breaks the schema or its task's answer format (the message says how)."""


def task_code(task: str) -> str:
    """The canonical (upper-case) task code, or a ConfigError listing the nine."""
    code = task.strip().upper()
    if code not in TASKS:
        raise ConfigError(f"unknown script task {task!r}; tasks: {', '.join(TASKS)}")
    return code


def answer_format(task: str) -> str:
    return TASKS[task_code(task)][0]


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScriptError(f"{what} must be a number, got {value!r}")
    return float(value)


def _text(value: Any, what: str, *, empty: bool = False) -> str:
    if value is None and empty:
        return ""
    if not isinstance(value, str) or (not empty and not value.strip()):
        raise ScriptError(f"{what} must be a non-empty string")
    return value.strip()


def _videos(raw: Any, task: str) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        raise ScriptError("videos must be a non-empty list")
    want = TASKS[task][1]
    if want is not None and len(raw) != want:
        raise ScriptError(f"{task} needs {want} videos, got {len(raw)}")
    if want is None and not 3 <= len(raw) <= 6:
        raise ScriptError(f"{task} needs 3 to 6 clips, got {len(raw)}")
    videos = []
    for i, v in enumerate(raw, 1):
        if not isinstance(v, dict):
            raise ScriptError(f"video {i} must be an object")
        duration = _num(v.get("duration"), f"video {i} duration")
        if duration <= 0:
            raise ScriptError(f"video {i} duration must be positive")
        timeline = v.get("timeline")
        if not isinstance(timeline, list) or not timeline:
            raise ScriptError(f"video {i} timeline must be a non-empty list")
        events = []
        for j, e in enumerate(timeline, 1):
            if not isinstance(e, dict):
                raise ScriptError(f"video {i} event {j} must be an object")
            start = _num(e.get("start"), f"video {i} event {j} start")
            end = _num(e.get("end"), f"video {i} event {j} end")
            if not 0 <= start < end <= duration + 1e-6:
                raise ScriptError(
                    f"video {i} event {j} [{start}, {end}] is not inside [0, {duration}]"
                )
            visual = _text(e.get("visual"), f"video {i} event {j} visual")
            caption = _text(e.get("caption"), f"video {i} event {j} caption", empty=True)
            events.append({"start": start, "end": end, "visual": visual, "caption": caption})
        events.sort(key=lambda e: (e["start"], e["end"]))
        videos.append({"video_index": i, "duration": duration, "timeline": events})
    return videos


def _answer(raw: Any, fmt: str, options: list[str], videos: list[dict[str, Any]]) -> str:
    letters = [o[0].upper() for o in options]
    if fmt == "interval":
        if isinstance(raw, str):
            try:
                raw = json.loads(raw)
            except json.JSONDecodeError:
                raise ScriptError(f"answer {raw!r} is not an interval [s, e]") from None
        if not (isinstance(raw, list) and len(raw) == 2):
            raise ScriptError(f"answer {raw!r} is not an interval [s, e]")
        s, e = _num(raw[0], "answer start"), _num(raw[1], "answer end")
        if not 0 <= s < e <= videos[1]["duration"] + 1e-6:
            raise ScriptError(f"answer [{s}, {e}] is not an interval inside Video 2")
        return json.dumps([round(s, 2), round(e, 2)])
    if isinstance(raw, list):  # ["A", "C"] for a multi-select (spec §9 #17)
        raw = "".join(str(x) for x in raw)
    if not isinstance(raw, str) or not raw.strip():
        raise ScriptError(f"answer must be a string, got {raw!r}")
    text = raw.strip().upper()
    if fmt == "order":
        order = [int(x) for x in re.findall(r"\d+", text)]
        if sorted(order) != list(range(1, len(videos) + 1)):
            raise ScriptError(f"answer {raw!r} is not an order of videos 1..{len(videos)}")
        return "->".join(str(x) for x in order)
    if len(options) < 2 or any(not re.match(r"^[A-Z][.)]", o) for o in options):
        raise ScriptError('options must be at least two strings like "A. ..."')
    picked = sorted(set(re.sub(r"[^A-Z]", "", text)))
    if not picked or any(x not in letters for x in picked):
        raise ScriptError(f"answer {raw!r} names no option among {''.join(letters)}")
    if fmt == "letter" and len(picked) != 1:
        raise ScriptError(f"answer {raw!r} must be one letter")
    if fmt == "multi" and len(picked) == len(letters):
        raise ScriptError("a multi-select answer cannot select every option")
    return "".join(picked)


def validate(raw: Any, task: str) -> dict[str, Any]:
    """The canonical script from an LLM's (or a file's) JSON object, or a ScriptError."""
    code = task_code(task)
    if not isinstance(raw, dict):
        raise ScriptError("the script must be a JSON object")
    fmt = TASKS[code][0]
    question = _text(raw.get("question"), "question")
    options = raw.get("options") or []
    if not isinstance(options, list) or any(not isinstance(o, str) for o in options):
        raise ScriptError("options must be a list of strings")
    options = [o.strip() for o in options]
    videos = _videos(raw.get("videos"), code)
    answer = _answer(raw.get("answer"), fmt, options, videos)
    meta = dict(raw.get("meta") or {})
    if raw.get("reasoning"):
        meta["reasoning"] = str(raw["reasoning"])
    script: dict[str, Any] = {"task": code, "question": question, "options": options}
    script.update(answer=answer, videos=videos)
    script["id"] = content_id(script)
    script["meta"] = meta
    return script


def content_id(script: dict[str, Any]) -> str:
    """A hash of what the master and the reward see (question, options, answer, videos)."""
    body = {k: script[k] for k in ("task", "question", "options", "answer", "videos")}
    text = json.dumps(body, sort_keys=True, ensure_ascii=False).lower()
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def extract_json(text: str) -> Any:
    """The JSON object in a model reply: a fenced block, else first ``{`` to last ``}``."""
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", text, re.DOTALL)
    body = fenced.group(1) if fenced else text[text.find("{") : text.rfind("}") + 1]
    if not body:
        raise ScriptError("the reply holds no JSON object")
    try:
        return json.loads(body)
    except json.JSONDecodeError as e:
        raise ScriptError(f"the reply's JSON does not parse: {e}") from None


# ---------------------------------------------------------------------------------------------
# Script sets on disk


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL file; a torn last line (a killed writer) is skipped."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    continue


def append_jsonl(path: Path, row: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
        f.flush()


def load_scripts(source: Path) -> list[dict[str, Any]]:
    """Every valid script in a JSONL file or in the ``*.jsonl`` (not rejects) of a folder.

    Raises:
        ConfigError: no such file or folder, or no scripts in it.
    """
    if source.is_dir():
        files = sorted(p for p in source.glob("*.jsonl") if not p.name.endswith(".rejects.jsonl"))
    elif source.is_file():
        files = [source]
    else:
        raise ConfigError(f"no script set at {source} (make one with: vidagent train scripts)")
    scripts = []
    for path in files:
        for i, row in enumerate(read_jsonl(path), 1):
            try:
                scripts.append({**validate(row, str(row.get("task", ""))), "meta": row["meta"]})
            except (ScriptError, ConfigError, KeyError) as e:
                raise ConfigError(f"{path.name} line {i}: {e}") from None
    if not scripts:
        raise ConfigError(f"{source} holds no scripts")
    return scripts


# ---------------------------------------------------------------------------------------------
# LLM synthesis


@dataclass(frozen=True)
class SynthesisReport:
    """What one ``train scripts`` run did."""

    path: Path
    written: int
    total: int
    rejected: int
    duplicates: int


#: A slot the paper's text glued to the next word ("Option <config_letter>is the ONLY", "Exactly
#: <num_correct>Videos must", "<duration>seconds"): the PDF extraction lost the space. The prompt
#: files keep the paper's text as printed (tests/prompts/test_paper_prompts.py lists each case);
#: :func:`fill` puts the space back, so the filled prompt reads "Option C is the ONLY". A slot
#: before a single letter is a unit and stays ("(0s to <duration>s)").
GLUED_SLOT = re.compile(r"(<[a-z_]+>)(?=[A-Za-z]{2})")


def fill(template: str, slots: dict[str, Any]) -> str:
    """The prompt with every ``<slot>`` replaced, a space put back after a slot the paper's
    text glued to a word; a slot left unfilled is our bug."""
    text = GLUED_SLOT.sub(r"\1 ", template)
    for key, value in slots.items():
        text = text.replace(f"<{key}>", str(value))
    left = re.findall(r"<([a-z_]+)>", text)
    if left:
        raise AssertionError(f"unfilled prompt slots: {left}")
    return text


def synthesis_prompt(task: str, config: dict[str, Any]) -> str:
    """The H.1 prompt of ``task`` filled with ``config`` plus the output schema."""
    from vidagent.prompts import load_prompt

    code = task_code(task)
    fmt = OUTPUT_FORMAT.replace("<ANSWER>", ANSWER_FORMATS[TASKS[code][0]])
    return fill(load_prompt(f"cvr_script_{code.lower()}"), config) + fmt


def synthesize(
    chat: Callable[[list[dict[str, str]]], str],
    task: str,
    n: int,
    out: Path,
    *,
    model: str,
    retries: int = 3,
    seed: int = 0,
    on_script: Callable[[dict[str, Any]], None] | None = None,
) -> SynthesisReport:
    """Grow ``out/<task>.jsonl`` to ``n`` valid, distinct scripts written by ``chat``.

    Args:
        chat: messages -> reply text (the ``llm`` role).
        task: one of :data:`TASKS`.
        n: scripts wanted in the file (those already there count).
        out: the set's folder.
        model: the model's spec, recorded on every script.
        retries: attempts per configuration before it is rejected.
        seed: picks the configurations (:func:`~vidagent.train.slots.config`).
        on_script: called with each script written.
    """
    from vidagent.prompts import prompt_hash
    from vidagent.train.slots import config as slot_config

    code = task_code(task)
    path, rejects = out / f"{code.lower()}.jsonl", out / f"{code.lower()}.rejects.jsonl"
    rows = list(read_jsonl(path))
    seen = {r["id"] for r in rows}
    tried = {r["meta"]["config_index"] for r in rows} | {
        r["config_index"] for r in read_jsonl(rejects)
    }
    written = rejected = duplicates = 0
    index = 0
    while len(seen) < n and index < 3 * n + len(tried):
        if index in tried:
            index += 1
            continue
        cfg = slot_config(code, index, seed)
        prompt = synthesis_prompt(code, cfg)
        messages = [{"role": "user", "content": prompt}]
        error = ""
        for _ in range(max(1, retries)):
            reply = chat(messages)
            try:
                script = validate(extract_json(reply), code)
            except ScriptError as e:
                error = str(e)
                messages = [*messages, {"role": "assistant", "content": reply}]
                messages.append(
                    {
                        "role": "user",
                        "content": f"Invalid: {error}. Reply again "
                        "with one corrected JSON object only.",
                    }
                )
                continue
            if script["id"] in seen:
                append_jsonl(rejects, {"config_index": index, "error": "duplicate", "model": model})
                duplicates += 1
            else:
                script["meta"].update(
                    source="llm",
                    model=model,
                    prompt_hash=prompt_hash(f"cvr_script_{code.lower()}"),
                    config_index=index,
                    config=cfg,
                    seed=seed,
                )
                append_jsonl(path, script)
                seen.add(script["id"])
                written += 1
                if on_script is not None:
                    on_script(script)
            break
        else:
            append_jsonl(rejects, {"config_index": index, "error": error, "model": model})
            rejected += 1
        index += 1
    return SynthesisReport(path, written, len(seen), rejected, duplicates)
