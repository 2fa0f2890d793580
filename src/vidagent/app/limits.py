"""The bounds on what a client may send, in one place, for every front end.

The HTTP API (:mod:`vidagent.server.routes`) and the MCP server (:mod:`vidagent.server.mcp`)
declare their inputs with the types below, so a request over a bound is refused at the edge
(422 over HTTP, a one-line tool error over MCP) before any work starts; the option count is
also checked by the application layer itself (:func:`check_options`), so the CLI refuses it
in the same words. docs/frontends/server.md lists the same numbers.

Why these numbers: a search query or a question is a sentence or a paragraph, and an embedding
model reads a few hundred tokens of it at most, so 2,000 and 8,000 characters leave room while
a 20 MB query (which held a server for minutes) is refused; options are lettered A to Z, so 26;
paths follow Linux's ``PATH_MAX`` (4,096 bytes) and ``NAME_MAX`` (255 bytes for one name);
references (video ids and names, job and trace ids, stage and strategy names) are single names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from vidagent.agents.answer import LETTERS
from vidagent.exceptions import ConfigError

#: a search query, in characters
MAX_QUERY_CHARS = 2_000
#: a question (or an event to ground), in characters
MAX_QUESTION_CHARS = 8_000
#: answer options of a multiple-choice question: lettered A to Z
MAX_OPTIONS = len(LETTERS)
#: one answer option, in characters
MAX_OPTION_CHARS = 1_000
#: clips one search returns
MAX_TOP = 100
#: a file path, in UTF-8 bytes (Linux's PATH_MAX)
MAX_PATH_BYTES = 4_096
#: one name in a path, in UTF-8 bytes (Linux's NAME_MAX)
MAX_NAME_BYTES = 255
#: a reference: a video id or name, a job, trace or run id, a stage or strategy name
MAX_REF_CHARS = 255
#: videos one request names
MAX_VIDEOS = 64
#: stages one index request names
MAX_STAGES = 64
#: reasoning steps one question may be given
MAX_STEPS = 1_000
#: a JSON request body, in bytes (uploads have their own limit, ``--max-upload-mb``)
MAX_BODY_BYTES = 1024 * 1024


def check_text(value: str) -> str:
    """``value`` when it is text a file system, a model and a JSON reply can all carry.

    Raises:
        ValueError: it holds a NUL character, or a lone surrogate (``"\\ud800"`` in JSON is
            not a character, and nothing downstream can encode it).
    """
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("is not valid Unicode (it holds a lone surrogate)") from None
    return value


def check_path(value: str) -> str:
    """``value`` (after :func:`check_text`) when it fits Linux's path limits.

    Raises:
        ValueError: longer than :data:`MAX_PATH_BYTES`, or a name in it longer than
            :data:`MAX_NAME_BYTES`.
    """
    check_text(value)
    if len(value.encode("utf-8")) > MAX_PATH_BYTES:
        raise ValueError(f"is longer than {MAX_PATH_BYTES} bytes")
    for name in value.replace("\\", "/").split("/"):
        if len(name.encode("utf-8")) > MAX_NAME_BYTES:
            raise ValueError(f"has a name longer than {MAX_NAME_BYTES} bytes")
    return value


#: a search query
Query = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS, description="what to look for, in words"),
    AfterValidator(check_text),
]
#: a question
Question = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUESTION_CHARS, description="the question"),
    AfterValidator(check_text),
]
#: one answer option
Option = Annotated[
    str,
    Field(max_length=MAX_OPTION_CHARS, description="an answer option"),
    AfterValidator(check_text),
]
#: a video id, unique id prefix or name, a job, trace or run id, a stage or strategy name
Ref = Annotated[
    str,
    Field(min_length=1, max_length=MAX_REF_CHARS, description="a name or id"),
    AfterValidator(check_path),
]
#: a file path
FilePath = Annotated[
    str, Field(min_length=1, description="a file path"), AfterValidator(check_path)
]
#: a video reference or a path (a question's videos may be files inside the media roots)
VideoOrPath = FilePath


#: one option is no choice: its answer would be "(A)" whatever the video shows
ONE_OPTION = (
    "one option given; a multiple-choice question takes two or more (none: an open question)"
)


def _too_many_options(count: int) -> str:
    return (
        f"{count} options given; a multiple-choice question takes at most {MAX_OPTIONS} "
        "(lettered A to Z)"
    )


def check_options(options: Sequence[str]) -> None:
    """Refuse more options than there are letters (the application layer's own check).

    Raises:
        ConfigError: more than :data:`MAX_OPTIONS` options, a single one (no choice), a blank
            one (answered "(A) ", it names nothing), or one given twice.
    """
    problem = _options_problem(options)
    if problem:
        raise ConfigError(problem)


def _options_ok(options: list[str]) -> list[str]:
    problem = _options_problem(options)
    if problem:
        raise ValueError(problem)
    return options


def _options_problem(options: Sequence[str]) -> str:
    """What is wrong with a question's options (see :func:`check_options`), or ``""``."""
    letters = [chr(ord("A") + i) for i in range(min(len(options), MAX_OPTIONS))]
    if len(options) > MAX_OPTIONS:
        return _too_many_options(len(options))
    if len(options) == 1:
        return ONE_OPTION
    texts = [" ".join(str(o).split()).casefold() for o in options]
    if "" in texts:
        return f"option {letters[texts.index('')]} is blank; every option needs its text"
    for i, text in enumerate(texts):
        if (j := texts.index(text)) < i:  # an answer naming it would name both
            return (
                f"options {letters[j]} and {letters[i]} are both {str(options[j]).strip()!r}; "
                "every option needs its own text"
            )
    return ""


#: the options of a multiple-choice question: refused past 26 in the CLI's words
Options = Annotated[
    list[Option],
    Field(
        description=f"answer options, in order (A, B, …; at most {MAX_OPTIONS})",
        json_schema_extra={"maxItems": MAX_OPTIONS},
    ),
    AfterValidator(_options_ok),
]


def describe_errors(errors: Sequence[Mapping[str, Any]], *, skip: int = 0) -> str:
    """Pydantic's validation errors as one line, ``field: message; …``, never echoing the value
    (it may be huge, NaN, or not encodable). ``skip`` drops leading ``loc`` parts (``body``)."""
    parts = []
    for error in errors:
        loc = [str(p) for p in error.get("loc", ())][skip:]
        where = ".".join(loc) or "body"
        message = str(error.get("msg", "invalid")).splitlines()[0]
        message = message.removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(dict.fromkeys(parts)) or "invalid input"
