"""Training the AgentCVR master (``vidagent train scripts|cvr|eval``): Script-Simulated RL
(:mod:`vidagent.train`) behind three calls, so that a front end drives no training module itself.

- :func:`write_scripts`: grow a script set with the ``llm`` role (the paper's prompts) or the
  offline template generator; a rerun resumes.
- :func:`train_cvr`: GRPO in the text simulator, resumable from the last checkpoint.
- :func:`evaluate_cvr`: the untrained, the warmed-up (if the run had a warm-up) and the trained
  master on the held-out scripts, each beside the set's majority-answer baseline.

Heavy dependencies (torch, transformers) load inside the training modules, on the call.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from vidagent.exceptions import ConfigError, UserError

if TYPE_CHECKING:
    from vidagent.config import Settings
    from vidagent.train.config import TrainConfig
    from vidagent.train.grpo import TrainReport


@dataclass(frozen=True)
class ScriptsReport:
    """What one ``train scripts`` run did.

    Attributes:
        path: the task's JSONL file.
        written: scripts added by this run; ``total`` the file holds now.
        rejected: configurations the llm wrote that broke the schema (llm generator).
        duplicates: scripts already in the file (llm generator).
        model: the llm spec that wrote them, or ``None`` for the template generator.
    """

    path: Path
    written: int
    total: int
    rejected: int = 0
    duplicates: int = 0
    model: str | None = None


@dataclass(frozen=True)
class EvalResult:
    """``train eval``: the held-out scripts' count, the turn limit, and each model's score
    (``label``, ``model``, ``reward``, ``format_rate``, ``accuracy``, ``simulator_calls``,
    ``majority_answer``, ``majority_baseline``)."""

    heldout: int
    max_turns: int
    scores: list[Any]


def default_generator(settings: Settings) -> Literal["llm", "template"]:
    """``template`` when the llm role is a weak reasoner (the embedded SmolLM2), else ``llm``: the
    paper's synthesis prompts ask for long, strictly validated JSON that SmolLM2-135M does not
    write (``train scripts --task PSS --n 3`` with it had written no script after 15 minutes)."""
    from vidagent.models.registry import declared_capabilities

    weak = declared_capabilities(settings.spec("llm"), "llm").weak_reasoner
    return "template" if weak else "llm"


def write_scripts(
    settings: Settings,
    task: str,
    count: int,
    out: Path,
    *,
    generator: Literal["llm", "template"] = "llm",
    seed: int = 0,
    retries: int = 3,
    on_script: Callable[[dict[str, Any]], None] | None = None,
) -> ScriptsReport:
    """Grow ``out/<task>.jsonl`` to ``count`` scripts of ``task`` (a rerun resumes).

    Raises:
        ConfigError: an unknown task, or an llm spec that cannot fill the role.
        UserError: ``out`` is no folder that can be written to.
    """
    from vidagent.train.scripts import append_jsonl, read_jsonl, synthesize, task_code

    code = task_code(task)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        why = e.strerror or type(e).__name__
        raise UserError(
            f"cannot write scripts to {out}: {why} (--out names another folder)"
        ) from None
    if generator == "template":
        from vidagent.train.templates import generate

        path = out / f"{code.lower()}.jsonl"
        have = {r["id"] for r in read_jsonl(path)}
        new = [s for s in generate(code, count, seed) if s["id"] not in have][: count - len(have)]
        for script in new:
            append_jsonl(path, script)
        return ScriptsReport(path, len(new), len(have) + len(new))
    from vidagent.train.llm import llm_chat

    spec = settings.spec("llm")
    chat = llm_chat(spec, settings, temperature=0.9)
    report = synthesize(
        chat, code, count, out, model=spec, retries=retries, seed=seed, on_script=on_script
    )
    return ScriptsReport(
        report.path, report.written, report.total, report.rejected, report.duplicates, spec
    )


def load_config(path: Path, overrides: Mapping[str, Any] | None = None) -> TrainConfig:
    """A training config file with ``section.key`` overrides applied.

    Raises:
        ConfigError: no such file, bad TOML, or a key or value the schema rejects.
    """
    from vidagent.train.config import load_config

    return load_config(path, dict(overrides or {}))


def train_cvr(config: TrainConfig, *, log: Callable[[str], None] = print) -> TrainReport:
    """Train (or resume training) the cvr master with GRPO per ``config``."""
    from vidagent.train.grpo import train

    return train(config, log=log)


def evaluate_cvr(config: TrainConfig, checkpoint: Path | None = None) -> EvalResult:
    """Score the untrained, the warmed-up (when the run has one) and the trained master
    (``checkpoint``, default: the run's latest) greedily on the config's held-out scripts.

    Raises:
        ConfigError: no checkpoint yet, or a config that holds out no scripts.
    """
    from vidagent.train import checkpoint as ckpt
    from vidagent.train.evaluate import score_model
    from vidagent.train.grpo import split_scripts

    trained = checkpoint or ckpt.latest(Path(config.run.output_dir))
    if trained is None:
        raise ConfigError(
            f"no checkpoint in {config.run.output_dir}; train first: vidagent train cvr"
        )
    _, held = split_scripts(config)
    if not held:
        raise ConfigError("the config holds out no scripts (data.heldout = 0)")
    r = config.rollout
    masters = [("untrained", config.model.name)]
    warm = Path(config.run.output_dir) / "warmup"
    if config.warmup.enabled and (warm / "warmup.json").is_file():
        masters.append(("warmed-up", str(warm)))
    masters.append(("trained", str(trained)))
    scores = [
        score_model(
            label,
            name,
            held,
            tokenizer_from=config.model.name,
            max_turns=r.max_turns,
            max_new_tokens=r.max_new_tokens,
            max_prompt_tokens=r.max_prompt_tokens,
            generic=config.data.prompt == "generic",
            response_chars=config.simulator.response_chars,
        )
        for label, name in masters
    ]
    return EvalResult(len(held), r.max_turns, scores)
