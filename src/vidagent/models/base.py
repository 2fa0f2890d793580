"""Typed requests, responses and the adapter interface every provider implements.

An adapter is tiny: one request method per role it serves, plus capabilities as data.
Retries, concurrency limits, accounting and caching live in :mod:`vidagent.models.client`,
never in adapters. Requests are frozen dataclasses with a canonical JSON form
(:meth:`cache_key`) so the response cache can key on the full request.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np

from vidagent.exceptions import ConfigError
from vidagent.roles import Role  # noqa: F401  - declared there; importable from here too

# ---------------------------------------------------------------------------------------------
# Chat


@dataclass(frozen=True)
class ImagePart:
    """An image in a chat message: encoded bytes (JPEG or PNG) and their MIME type."""

    data: bytes
    mime: str = "image/jpeg"

    def data_url(self) -> str:
        return f"data:{self.mime};base64,{base64.b64encode(self.data).decode('ascii')}"

    def fingerprint(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> Any:
        return json.loads(self.arguments or "{}")


@dataclass(frozen=True)
class Message:
    """One chat message. ``content`` is text, or a tuple of text and image parts."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | tuple[str | ImagePart, ...] = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p for p in self.content if isinstance(p, str))

    @property
    def images(self) -> tuple[ImagePart, ...]:
        if isinstance(self.content, str):
            return ()
        return tuple(p for p in self.content if isinstance(p, ImagePart))


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call: name, description and a JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ChatRequest:
    """A chat completion request.

    ``response_schema`` asks for JSON output following that JSON schema (structured output);
    ``json_mode`` asks for any JSON object.
    """

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    tool_choice: Literal["auto", "required", "none"] | None = None
    response_schema: dict[str, Any] | None = None
    json_mode: bool = False
    temperature: float = 0.0
    max_tokens: int | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def canonical(self) -> dict[str, Any]:
        """A JSON-able form with images replaced by their SHA-256 (for cache keys)."""

        def part(p: str | ImagePart) -> Any:
            return p if isinstance(p, str) else {"image": p.fingerprint(), "mime": p.mime}

        msgs = []
        for m in self.messages:
            d = asdict(m)
            d["content"] = m.content if isinstance(m.content, str) else [part(p) for p in m.content]
            msgs.append(d)
        body = asdict(self)
        body["messages"] = msgs
        return body

    def image_count(self) -> int:
        return sum(len(m.images) for m in self.messages)


@dataclass(frozen=True)
class Usage:
    """Tokens spent by one call (or summed over several) and what they cost.

    ``priced`` is False when no price is known for a call (see :mod:`vidagent.models.prices`):
    its ``cost_usd`` is then 0 but means "unknown", not "free"."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    priced: bool = True

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
            self.priced and other.priced,
        )


@dataclass(frozen=True)
class ChatResponse:
    """What a chat model answered."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    finish_reason: str = "stop"
    model: str = ""
    cached: bool = False

    def json(self) -> Any:
        """The text parsed as JSON (for structured output)."""
        return json.loads(self.text)


# ---------------------------------------------------------------------------------------------
# Embeddings


@dataclass(frozen=True)
class EmbedRequest:
    texts: tuple[str, ...]

    def canonical(self) -> dict[str, Any]:
        return {"texts": list(self.texts)}


@dataclass(frozen=True)
class EmbedResponse:
    vectors: np.ndarray  # (N, D) float32, L2-normalised
    usage: Usage = Usage()
    cached: bool = False


# ---------------------------------------------------------------------------------------------
# Perception: speech, text in images, detections


@dataclass(frozen=True)
class Word:
    t0: float
    t1: float
    text: str
    probability: float = 1.0


@dataclass(frozen=True)
class Segment:
    t0: float
    t1: float
    text: str
    words: tuple[Word, ...] = ()


@dataclass(frozen=True)
class Transcript:
    language: str
    segments: tuple[Segment, ...]

    @property
    def text(self) -> str:
        return " ".join(s.text.strip() for s in self.segments).strip()


@dataclass(frozen=True)
class Decoding:
    """Decoding settings a caller asks of a speech recogniser (None: the backend's own).

    Whisper's names and meanings; a backend applies those it supports. ``temperature`` is one
    value (0.0 turns off the fallback to higher temperatures); ``vad`` skips silence first.
    """

    beam_size: int | None = None
    temperature: float | None = None
    log_prob_threshold: float | None = None
    no_speech_threshold: float | None = None
    condition_on_previous_text: bool | None = None
    vad: bool | None = None


@dataclass(frozen=True)
class TranscribeRequest:
    audio: np.ndarray  # (S,) float32 mono at 16 kHz
    language: str | None = None
    decoding: Decoding = Decoding()


Box = tuple[float, float, float, float]  # x0, y0, x1, y1 in pixels of the input image


@dataclass(frozen=True)
class TextLine:
    text: str
    box: Box
    score: float


@dataclass(frozen=True)
class Detection:
    label: str
    box: Box
    score: float


# ---------------------------------------------------------------------------------------------
# Adapters


@dataclass(frozen=True)
class Capabilities:
    """What an adapter can do; call sites read these instead of checking types."""

    roles: frozenset[str]
    supports_tools: bool = False
    supports_images: bool = False
    supports_json_schema: bool = False
    max_images: int = 0
    batch_size: int = 1
    local: bool = True  # runs in this process: no network, concurrency 1 per loaded model
    #: Calls a local adapter serves at once; more than 1 only where it shares its own workers
    #: out between calls (remote endpoints take the settings' limits instead).
    concurrency: int = 1
    context_tokens: int | None = None  # prompt + output limit, where known and small
    #: A stand-in for a VLM that reports measured facts (detections, OCR, colours) instead of
    #: seeing pixels: callers hand it the index rows of a span, not images to look at.
    describer: bool = False
    #: The labels a closed-vocabulary detector finds; None: open vocabulary (or unknown).
    vocabulary: frozenset[str] | None = None
    #: Labels whose detection score is an unbounded margin (HOG's SVM), not a probability.
    margin_labels: frozenset[str] = frozenset()
    #: A model too small to reason (the embedded SmolLM2-135M): runs show it the index's
    #: evidence first and refuse every repeated call; ingest writes extractive summaries and
    #: builds no entity graph with it.
    weak_reasoner: bool = False
    #: Replies come from a test's script, not a model (``fake:``): nothing is asked of it that
    #: the script did not plan (no frames looked at to check citations, no entity graph).
    scripted: bool = False
    #: Chat requests can go through an asynchronous batch API (OpenAI's: half the price,
    #: results within a day): :meth:`Adapter.batch_submit` and the two after it.
    supports_batch: bool = False


@dataclass(frozen=True)
class BatchStatus:
    """Where one submitted batch stands.

    Attributes:
        batch_id: the provider's id.
        state: ``validating``, ``in_progress``, ``finalizing``, ``completed``, ``failed``,
            ``expired``, ``cancelling`` or ``cancelled`` (OpenAI's words).
        output_file: the file of the answers, once there is one.
        error_file: the file of the requests that failed, once there is one.
        errors: why the batch itself failed, in one line ("" if it did not).
    """

    batch_id: str
    state: str
    output_file: str = ""
    error_file: str = ""
    errors: str = ""


def option_number(
    spec: str,
    options: dict[str, str],
    name: str,
    default: float,
    *,
    minimum: float = 0,
    whole: bool = True,
) -> Any:
    """The option ``name`` of ``spec`` as a number (an int when ``whole``), at least
    ``minimum`` (:meth:`Adapter.number`, for a backend's ``status`` too, before any adapter).

    Raises:
        ConfigError: the option is not such a number (one line, naming the spec).
    """
    raw = options.get(name)
    if raw is None:
        return default
    try:
        value = int(raw) if whole else float(raw)
    except ValueError:
        value = None
    if value is None or math.isnan(value) or value < minimum:
        kind = "a whole number" if whole else "a number"
        raise ConfigError(f"{spec}: option {name} must be {kind} >= {minimum:g}, not {raw!r}")
    return value


def option_flag(options: dict[str, str], name: str, default: bool) -> bool:
    """The spec option ``name`` as a flag (``1``/``true``/``yes``/``on`` or their opposites).

    Raises:
        ConfigError: the option is none of those words.
    """
    raw = options.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"spec option {name}={raw!r} must be 0 or 1")


class Adapter:
    """Base of every provider adapter. Override the methods of the roles you serve.

    Adapters load heavy weights lazily, raise typed :class:`~vidagent.exceptions.ProviderError`
    subclasses, and never retry, cache or count: the client layer does that.
    """

    provider: ClassVar[str] = ""
    capabilities: Capabilities = Capabilities(roles=frozenset())

    def __init__(self, model: str, options: dict[str, str] | None = None) -> None:
        self.model = model
        self.options = dict(options or {})

    @classmethod
    def declares(cls, model: str, options: dict[str, str]) -> Capabilities:
        """The capabilities this adapter declares for ``model`` before it is built (the
        class's; an adapter whose model decides one, such as a weak reasoner, says so)."""
        return cls.capabilities

    def number(self, name: str, default: float, *, minimum: float = 0, whole: bool = True) -> Any:
        """The spec option ``name`` as a number (an int when ``whole``), at least ``minimum``.

        Raises:
            ConfigError: the option is not such a number (one line, naming the spec).
        """
        return option_number(self.spec, self.options, name, default, minimum=minimum, whole=whole)

    @property
    def spec(self) -> str:
        opts = "&".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.provider}:{self.model}" + (f"?{opts}" if opts else "")

    @property
    def endpoint(self) -> str:
        """Key for per-endpoint concurrency limits: one loaded model, or one remote server."""
        return self.spec

    def chat(self, request: ChatRequest) -> ChatResponse:
        raise NotImplementedError(f"{self.spec} does not chat")

    def batch_submit(self, requests: Sequence[tuple[str, ChatRequest]]) -> str:
        """Submit chat requests, each under its custom id, as one batch; its id
        (``capabilities.supports_batch``)."""
        raise NotImplementedError(f"{self.spec} has no batch API")

    def batch_status(self, batch_id: str) -> BatchStatus:
        """Where a submitted batch stands."""
        raise NotImplementedError(f"{self.spec} has no batch API")

    def batch_results(self, status: BatchStatus) -> dict[str, ChatResponse | Exception]:
        """A finished batch's answers by custom id; a request that failed maps to its error
        (a :class:`~vidagent.exceptions.ProviderError`)."""
        raise NotImplementedError(f"{self.spec} has no batch API")

    def embed(self, request: EmbedRequest) -> EmbedResponse:
        raise NotImplementedError(f"{self.spec} does not embed text")

    def embed_images(self, images: list[np.ndarray]) -> np.ndarray:
        raise NotImplementedError(f"{self.spec} does not embed images")

    def transcribe(self, request: TranscribeRequest) -> Transcript:
        raise NotImplementedError(f"{self.spec} does not transcribe")

    def read_text(self, images: list[np.ndarray]) -> list[list[TextLine]]:
        """OCR on RGB images, each (H, W, 3) uint8."""
        raise NotImplementedError(f"{self.spec} does not read text")

    def detect(
        self, images: list[np.ndarray], labels: Sequence[str] | None = None
    ) -> list[list[Detection]]:
        """Detections on RGB images, each (H, W, 3) uint8, boxes in pixels of that image.

        Args:
            images: The frames.
            labels: Class names to look for. An open-vocabulary detector (``vocabulary`` None)
                prompts with them and labels its detections with these very names; None asks
                for its default set. A closed-vocabulary detector may ignore them (callers
                filter) and is never passed any by :class:`~vidagent.tools.detectors.RoleDetector`.
        """
        raise NotImplementedError(f"{self.spec} does not detect")

    def warm(self) -> None:
        """Load the weights now, so that a later call does not wait for them (ingest calls
        this in a thread beside the stages that run before the one that needs them). The
        default does nothing: remote and light adapters have nothing worth loading early."""

    def close(self) -> None:
        """Release sockets or weights."""


@dataclass
class BackendStatus:
    """What ``vidagent info`` reports for one role, found without importing the backend."""

    spec: str
    usable: bool
    detail: str = ""
    notes: list[str] = field(default_factory=list)
