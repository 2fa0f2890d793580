"""Settings, layered: defaults < config file < ``VIDAGENT_*`` environment < CLI flags / arguments.

The home directory is ``$VIDAGENT_HOME`` (default ``~/.vidagent``). It holds ``config.toml``,
the default Library (``library/``), the model response cache (``cache/``) and this CPU's
measured speed for the dry run (``speed.json``, :mod:`vidagent.ingest.speed`). A different
config file can be named with ``$VIDAGENT_CONFIG`` or ``--config``.

Every field can be set in each layer under the same name: ``llm = "openai:gpt-4o"`` in the file,
``VIDAGENT_LLM=openai:gpt-4o`` in the environment, ``--llm openai:gpt-4o`` on the command line.
Dict-valued fields (``prices``, ``concurrency``) take JSON in the environment.

This module imports nothing heavy: ``vidagent info`` and ``--help`` must stay fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from vidagent.exceptions import ConfigError
from vidagent.roles import FOLLOWS, ROLES  # declared there; many modules import ROLES from here
from vidagent.specs import parse_spec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

ENV_PREFIX = "VIDAGENT_"

#: LanceDB's caches of an open Library, in MiB (the settings ``library_index_cache_mib`` and
#: ``library_metadata_cache_mib``; see :mod:`vidagent.library.tables`). LanceDB's own defaults
#: (6 GiB and 1 GiB) let a long-running server grow by each table version it reads until they
#: fill; these hold a 1,000-hour Library's indexes and the current versions' metadata.
LIBRARY_INDEX_CACHE_MIB = 256
LIBRARY_METADATA_CACHE_MIB = 32

#: The embedded offline defaults (see DESIGN.md, "Models: roles and spec strings").
#: The embedded smoke-test llm (SmolLM2-135M), on either runtime: it runs the pipeline offline,
#: but too weak and too slow on a CPU for work that only a capable model makes worth its cost
#: (AVI's entity graph).
SMOKE_TEST_LLMS = ("llamacpp:smollm2", "transformers:smollm2")


def embedded_llm() -> str:
    """The embedded llm's spec: SmolLM2-135M on llama.cpp where llama-cpp-python is installed
    (``vidagent[llm]``, built from source for minutes), else on transformers where that is
    (``vidagent[llm-torch]``, wheels only: the quick install of ``scripts/demo.sh``). Found
    without importing either."""
    from importlib.util import find_spec

    if find_spec("llama_cpp") is None and find_spec("transformers") is not None:
        return "transformers:smollm2-135m"
    return "llamacpp:smollm2-135m"


DEFAULT_SPECS: dict[str, str] = {
    "llm": embedded_llm(),
    "vlm": "perception:describer",
    "embed": "sentence-transformers:all-minilm-l6-v2",
    "image_embed": "none:",
    "asr": "faster-whisper:tiny.en",
    "ocr": "rapidocr:pp-ocr",
    "detector": "opencv:hog+haar",
}


class Price(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    input: float = Field(0.0, ge=0)
    output: float = Field(0.0, ge=0)


class Settings(BaseModel):
    """Every setting vidagent reads. Build one with :func:`load_settings`."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    home: Path = Field(default_factory=lambda: Path("~/.vidagent").expanduser())
    library: str = Field(
        "", description="Library directory or object-store URI; default <home>/library"
    )

    llm: str = DEFAULT_SPECS["llm"]
    vlm: str = DEFAULT_SPECS["vlm"]
    captioner: str = Field("", description="database captioner; empty: the vlm's spec")
    tool_vlm: str = Field("", description="vision model of the tools; empty: the vlm's spec")
    embed: str = DEFAULT_SPECS["embed"]
    image_embed: str = DEFAULT_SPECS["image_embed"]
    asr: str = DEFAULT_SPECS["asr"]
    ocr: str = DEFAULT_SPECS["ocr"]
    detector: str = DEFAULT_SPECS["detector"]

    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = Field("", repr=False)
    request_timeout: float = Field(60.0, gt=0, description="seconds per model request")
    max_retries: int = Field(5, ge=0, description="retries of timeouts, 429 and 5xx")
    backoff_base: float = Field(
        1.0, ge=0, description="first backoff in seconds; doubles per retry"
    )
    backoff_max: float = Field(60.0, ge=0)
    default_concurrency: int = Field(4, ge=1, description="concurrent requests per remote endpoint")
    concurrency: dict[str, Annotated[int, Field(ge=1)]] = Field(
        default_factory=dict, description="per-endpoint overrides"
    )
    prices: dict[str, Price] = Field(default_factory=dict, description="per model spec")
    cache: Literal["off", "on", "replay"] = "on"

    clip_seconds: float = Field(5.0, gt=0, description="uniform clip length (DVD uses 5 s)")
    watch_window: float = Field(
        30.0, gt=0, description="stream seconds `vidagent watch` indexes at a time (a window)"
    )
    caption_transcripts: bool = Field(
        True, description="captions see the clip's transcript (DVD's [TRANSCRIPTS] slot)"
    )
    caption_style: Literal["registry", "avi"] = Field(
        "registry",
        description="clip captions: DVD's progressive subject registry (Table 9) or AVI's "
        "independent per-clip captions (Fig. 7)",
    )
    caption_skip_repeats: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="0: off (the papers: every clip captioned); else a clip whose stored "
        "thumbnails repeat the previous clip's picture, no 32x32 greyscale pixel differing by "
        "more than this (0-1; 0.05 suggested), reuses its caption instead of calling the model",
    )
    batch: bool = Field(
        False,
        description="send ingest's independent endpoint calls (the entity graph's windows, "
        "AVI-style captions) through OpenAI's Batch API: half the price, answers within 24 h, "
        "the run waiting; its state kept in the Library so a rerun resumes",
    )
    summary: Literal["auto", "model", "extractive"] = Field(
        "auto",
        description="global summary: the llm's (VideoAgent2's prompt) or an extractive digest of "
        "the index; auto: the digest for the embedded smoke-test llm, else the llm's",
    )
    evidence_first: Literal["auto", "on", "off"] = Field(
        "auto",
        description="agents see what the index retrieves for the question and options before "
        "their first step; auto: on for the embedded smoke-test llm only",
    )
    abstain: Literal["auto", "never", "always-report"] = Field(
        "auto",
        description="an answer its checked citations do not support: auto says 'insufficient "
        "evidence' (multiple choice: keeps its letter, marked abstained); always-report only "
        "records it; never does neither (the benchmark harness records, never applies)",
    )
    embed_text: Literal["caption", "caption+speech+text"] = Field(
        "caption+speech+text",
        description="what a clip's vector embeds: the caption alone (DVD) or with speech and text",
    )
    speakers: Literal["resemblyzer", "off"] = Field(
        "resemblyzer",
        description="label who speaks each transcript segment at ingest (Resemblyzer's voice "
        "encoder, bundled in its wheel; the `speakers` extra), or off",
    )
    sample_fps: float = Field(1.0, gt=0, description="frames per second kept as thumbnails")
    thumb_size: int = Field(320, ge=16, description="thumbnail longest side in pixels")

    library_index_cache_mib: int = Field(
        LIBRARY_INDEX_CACHE_MIB,
        ge=1,
        description="LanceDB's cache of index pages (ANN partitions, BTREE pages) per open Library",
    )
    library_metadata_cache_mib: int = Field(
        LIBRARY_METADATA_CACHE_MIB,
        ge=1,
        description="LanceDB's cache of table metadata (manifests, fragments) per open Library",
    )

    @field_validator("home")
    @classmethod
    def _absolute_home(cls, value: Path) -> Path:
        # Paths made under it are stored (a stream's playlist is its video's source): a
        # relative home would store paths that mean nothing from another folder.
        return value.expanduser().absolute()

    @field_validator(*ROLES)
    @classmethod
    def _known_spec(cls, value: str, info: ValidationInfo) -> str:
        if not value and info.field_name in FOLLOWS:
            return value  # follows its role
        parse_spec(value)  # ConfigError (not a ValueError) passes through pydantic unwrapped
        return value

    def spec(self, role: str) -> str:
        """The spec string configured for ``role`` (an unset ``captioner`` or ``tool_vlm``:
        the ``vlm``'s)."""
        if role not in ROLES:
            raise ConfigError(f"unknown model role {role!r}; roles are: {', '.join(ROLES)}")
        value = str(getattr(self, role))
        return value if value or role not in FOLLOWS else self.spec(FOLLOWS[role])

    @property
    def library_uri(self) -> str:
        return self.library or str(self.home / "library")

    @property
    def cache_dir(self) -> Path:
        return self.home / "cache"


def _read_config_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config file ({e.strerror})") from None
    # Accept both a flat file and one with a [vidagent] table.
    return dict(data.get("vidagent", data))


def _env_layer(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in Settings.model_fields.items():
        raw = env.get(ENV_PREFIX + name.upper())
        if raw is None:
            continue
        if field.annotation is not None and "dict" in str(field.annotation):
            try:
                out[name] = json.loads(raw)
            except json.JSONDecodeError:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be JSON, got {raw!r}") from None
        else:
            out[name] = raw
    # The conventional variable works too, below vidagent's own.
    if "openai_api_key" not in out and env.get("OPENAI_API_KEY"):
        out["openai_api_key"] = env["OPENAI_API_KEY"]
    return out


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    """Build Settings from the four layers.

    Args:
        overrides: highest layer (CLI flags, function arguments); ``None`` values are ignored.
        config_file: a TOML file; default ``$VIDAGENT_CONFIG`` or ``<home>/config.toml`` if present.
        env: the environment to read (default ``os.environ``).
    """
    env = os.environ if env is None else env
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    env_values = _env_layer(env)
    home = Path(overrides.get("home") or env_values.get("home") or "~/.vidagent").expanduser()

    explicit = config_file or env.get(ENV_PREFIX + "CONFIG")
    path = Path(explicit).expanduser() if explicit else home / "config.toml"
    if explicit and not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    file_values = _read_config_file(path) if path.is_file() else {}

    merged: dict[str, Any] = {**file_values, **env_values, **overrides, "home": home}
    unknown = sorted(set(merged) - set(Settings.model_fields))
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}")
    try:
        return Settings(**merged)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"setting {where}: {err['msg']}") from None
