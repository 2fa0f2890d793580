"""GRPO for the AgentCVR master in the text simulator (spec §3.5): ``vidagent train cvr``.

**Why TRL's components and not its GRPOTrainer.** TRL 1.16's ``GRPOTrainer`` does multi-turn
through ``tools=`` / ``environment_factory=`` — native tool calls rendered by the model's chat
template — or through ``rollout_func``, an experimental hook for a vLLM server returning one
completion per prompt. AgentCVR's master speaks the paper's free-text JSON actions, with up to
three format retries per turn, a forced answer turn and observations as ``[TOOL OBS]`` user
messages, all owned by :func:`~vidagent.agents.cvr.protocol.run_master` — the same loop that
runs on real videos, which is the point of sim-to-real. Re-expressing that loop as TRL tool calls
would fork it. So this module drives ``run_master`` itself and takes from TRL what is loop
agnostic: ``selective_log_softmax`` and ``entropy_from_logits`` (:mod:`.policy`); PEFT for LoRA;
accelerate for devices and data-parallel scale-out (``accelerate launch``, see
``configs/train/``); nothing home-made for distribution.

The objective, per mini-batch of prompts (token-mean over every master token in it)::

    loss = mean_t [ -min(r_t A, clip(r_t, 1-ε, 1+ε) A) + β k3_t ],   r_t = π_θ(y_t) / π_old(y_t)
    k3_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1          (KL to the frozen initial policy)

with ``A`` the trajectory's group-relative advantage (:func:`.rollout.group_advantages`; zero for
groups whose rewards are all equal), shared by every accepted generation of the trajectory.
Tokens are those the master generated in the replies ``run_master`` accepted as actions;
observations are prompt tokens and never enter the loss. **Rejected format attempts are left
out** (the paper scores episodes and says nothing of retries): a malformed reply that was
retried must not be reinforced because the retry later led to a right answer. Their cost is
already in the reward — a retry sets R_fmt to 0 — so a trajectory with retries scores below its
clean peers and its accepted replies get the smaller advantage. An episode whose every reply
was rejected (three failed attempts) adds no tokens; it weighs only through its group's mean. ``π_old`` is the policy
that sampled: with one PPO epoch and one mini-batch per step the ratio is 1 at the update
(on-policy), otherwise log-probabilities are taken before the first update.
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vidagent.models.transformers_llm import gguf_read_once
from vidagent.train import checkpoint, metrics
from vidagent.train.config import TrainConfig
from vidagent.train.policy import Generator, Sample, load_causal_lm, load_tokenizer, token_logps
from vidagent.train.rollout import Trajectory, group_advantages, rollout


@dataclass(frozen=True)
class TrainReport:
    output_dir: Path
    steps: int
    resumed_from: int
    checkpoint: Path | None
    plot: Path | None


def split_scripts(cfg: TrainConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(train, held-out)`` scripts: the set shuffled by the seed, ``heldout`` of them kept out.

    The held-out scripts are drawn evenly across answers — round robin over the distinct
    answers, each in the shuffled order, from the end of the shuffle — so a small held-out set
    is not lopsided by chance (8 scripts drawn plainly once held 5 B's: a 62.5% baseline for a
    master that always says B). Its majority-answer baseline is then as low as the set allows.
    """
    from vidagent.exceptions import ConfigError
    from vidagent.train.scripts import load_scripts, task_code
    from vidagent.train.templates import generate

    tasks = [task_code(t) for t in cfg.data.tasks]
    if cfg.data.scripts == "template":
        scripts = [s for t in tasks for s in generate(t, cfg.data.template_per_task, cfg.run.seed)]
    else:
        scripts = [s for s in load_scripts(Path(cfg.data.scripts)) if s["task"] in tasks]
    random.Random(cfg.run.seed).shuffle(scripts)
    by_answer: dict[str, list[int]] = {}
    for i in reversed(range(len(scripts))):
        by_answer.setdefault(str(scripts[i]["answer"]), []).append(i)
    queues = [by_answer[a] for a in sorted(by_answer)]
    kept: set[int] = set()
    while len(kept) < min(cfg.data.heldout, len(scripts)):
        for q in queues:
            if q and len(kept) < cfg.data.heldout:
                kept.add(q.pop(0))
    held = [s for i, s in enumerate(scripts) if i in kept]
    train = [s for i, s in enumerate(scripts) if i not in kept]
    if not train:
        raise ConfigError(f"no training scripts left after holding out {cfg.data.heldout}")
    return train, held


def batch_for(step: int, train: list[dict[str, Any]], size: int, seed: int) -> list[Any]:
    """The prompts of ``step`` (1-based): epochs walk a per-epoch shuffle of the set."""
    per_epoch = math.ceil(len(train) / size)
    epoch, b = divmod(step - 1, per_epoch)
    order = random.Random(f"{seed}:epoch:{epoch}").sample(range(len(train)), len(train))
    return [train[order[(b * size + j) % len(train)]] for j in range(size)]


def trained_samples(traj: Trajectory) -> list[Sample]:
    """The samples of ``traj`` that enter the loss: its accepted replies (module doc)."""
    return [s for s in traj.samples if not s.rejected]


def grpo_token_loss(
    logps: Any, old: Any, ref: Any | None, adv: Any, clip_eps: float, beta: float
) -> tuple[Any, Any, Any]:
    """Per-token loss, KL and whether clipped, each ``(B, C)``; ``adv`` is ``(B, 1)``."""
    import torch

    ratio = torch.exp(logps - old)
    clipped = torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps)
    loss = -torch.min(ratio * adv, clipped * adv)
    kl = torch.zeros_like(logps)
    if ref is not None:
        delta = ref - logps
        kl = torch.exp(delta) - delta - 1
        loss = loss + beta * kl
    return loss, kl, (ratio - clipped).abs() > 1e-8


#: Settings a resumed run may change: how long it trains and how it saves and runs, not what
#: a step does (``section.field``).
RESUMABLE = frozenset(
    {"grpo.max_steps", "grpo.epochs", "run.output_dir", "run.save_every", "run.keep_checkpoints",
     "run.threads"}
)  # fmt: skip


def check_resume(out: Path, cfg: TrainConfig) -> None:
    """Refuse to resume the run in ``out`` under settings that change what a step does (the
    group size, the learning rate, the model, ...): its ``config.json`` would then describe
    steps it did not train that way.

    Raises:
        ConfigError: naming the first such setting, with both values.
    """
    import json

    from vidagent.exceptions import ConfigError

    saved = out / "config.json"
    if not saved.is_file():
        return
    try:
        was = TrainConfig.model_validate(json.loads(saved.read_text(encoding="utf-8")))
    except (ValueError, OSError):
        raise ConfigError(
            f"{saved}: the run's settings do not parse; give another output_dir"
        ) from None
    old, new = was.model_dump(mode="json"), cfg.model_dump(mode="json")
    for section, fields in old.items():
        for name, value in fields.items():
            key, now = f"{section}.{name}", new[section].get(name)
            if key not in RESUMABLE and now != value:
                raise ConfigError(
                    f"{out} holds a training run with {key} = {value!r}, not {now!r}; resume "
                    "it with the same settings, or give another run.output_dir"
                )


class Trainer:
    """One training run: policy, reference, optimiser, data and the step loop."""

    def __init__(self, cfg: TrainConfig, *, log: Callable[[str], None] = print) -> None:
        import torch
        from accelerate import Accelerator

        self.cfg, self.log = cfg, log
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        self.out = Path(cfg.run.output_dir)
        self.acc = Accelerator(cpu=not torch.cuda.is_available())
        self.train_set, self.heldout = split_scripts(cfg)
        checkpoint.clean_partial(self.out)
        self.resume = checkpoint.latest(self.out)
        if self.resume is not None:
            check_resume(self.out, cfg)
        #: GRPO's initial policy and KL reference: the config's model, or its format warm-up
        self.base = cfg.model.name
        if cfg.warmup.enabled:  # it trains between its loads: no read to share across it
            self.tokenizer = load_tokenizer(cfg.model.name)
            self.base = self._warm_up()
            self.model = self._policy()
        else:
            with gguf_read_once():  # the tokenizer and the weights from one read of a GGUF file
                self.tokenizer = load_tokenizer(cfg.model.name)
                self.model = self._policy()
        self.ref = None
        if cfg.grpo.beta > 0 and not cfg.lora.enabled:  # LoRA: the reference is the adapter off
            # The initial policy: a copy of the policy before its first step, where no
            # checkpoint was resumed, rather than a second load of the same weights (16 s of a
            # 66 s CPU run from SmolLM2's GGUF, which transformers de-quantises on every load).
            ref = (
                copy.deepcopy(self.model)
                if self.resume is None
                else load_causal_lm(self.base, cfg.model.dtype)
            )
            self.ref = ref.to(self.acc.device)
            self.ref.requires_grad_(False)
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=cfg.optim.lr, betas=cfg.optim.betas, weight_decay=cfg.optim.weight_decay
        )
        self.model, self.optimizer = self.acc.prepare(self.model, self.optimizer)
        self.start = 0
        if self.resume is not None:
            self.start = int(checkpoint.load_state(self.resume, self.optimizer)["step"])
        self.visual = None
        if cfg.simulator.visual != "reader":
            from vidagent.config import load_settings
            from vidagent.train.llm import llm_chat

            self.visual = llm_chat(
                cfg.simulator.visual, load_settings({}), temperature=cfg.simulator.temperature
            )

    def _warm_up(self) -> str:
        """The format warm-up's folder, trained now unless a previous run left it complete."""
        from vidagent.train import warmup

        folder = self.out / "warmup"
        if not (folder / warmup.REPORT).is_file():
            import torch

            if self.acc.is_main_process:
                torch.manual_seed(self.cfg.run.seed)
                model = load_causal_lm(self.cfg.model.name, self.cfg.model.dtype)
                report = warmup.warm_up(
                    self.cfg, model, self.tokenizer, self.train_set, log=self.log
                )
                self.out.mkdir(parents=True, exist_ok=True)
                warmup.save(folder, model, self.tokenizer, report)
                del model
            self.acc.wait_for_everyone()
        return str(folder.resolve())

    def _policy(self) -> Any:
        cfg = self.cfg
        name = str(self.resume) if self.resume is not None else self.base
        if cfg.lora.enabled:
            from peft import LoraConfig, PeftModel, get_peft_model

            base = load_causal_lm(self.base, cfg.model.dtype)
            if self.resume is not None:
                model = PeftModel.from_pretrained(base, name, is_trainable=True)
            else:
                lora = LoraConfig(
                    r=cfg.lora.r,
                    lora_alpha=cfg.lora.alpha,
                    lora_dropout=cfg.lora.dropout,
                    target_modules=cfg.lora.target_modules,
                    task_type="CAUSAL_LM",
                )
                model = get_peft_model(base, lora)
        else:
            model = load_causal_lm(name, cfg.model.dtype)
        if cfg.model.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        return model

    @property
    def total_steps(self) -> int:
        g = self.cfg.grpo
        return g.max_steps or g.epochs * math.ceil(len(self.train_set) / g.batch_size)

    def _ref_logps(self, micro: list[Sample]) -> Any:
        import torch

        pad, temp = self.tokenizer.pad_token_id, self.cfg.rollout.temperature
        with torch.no_grad():
            if self.ref is not None:
                return token_logps(self.ref, micro, pad, temp)[0]
            with self.acc.unwrap_model(self.model).disable_adapter():
                return token_logps(self.model, micro, pad, temp)[0]

    def _collect(self, step: int) -> list[Trajectory]:
        import torch

        cfg, acc = self.cfg, self.acc
        batch = batch_for(step, self.train_set, cfg.grpo.batch_size, cfg.run.seed)
        mine = batch[acc.process_index :: acc.num_processes]
        torch.manual_seed(cfg.run.seed * 1_000_003 + step * 97 + acc.process_index)
        r = cfg.rollout
        gen = Generator(
            acc.unwrap_model(self.model),
            self.tokenizer,
            r.temperature,
            r.top_p,
            r.max_new_tokens,
            r.max_prompt_tokens,
        )
        gen.model.eval()
        trajs: list[Trajectory] = []
        for script in mine:
            group = [
                rollout(
                    script,
                    gen,
                    max_turns=r.max_turns,
                    visual=self.visual,
                    generic=cfg.data.prompt == "generic",
                    response_chars=cfg.simulator.response_chars,
                )
                for _ in range(r.group_size)
            ]
            advs = group_advantages([t.reward.total for t in group])
            for t, a in zip(group, advs, strict=True):
                for s in t.samples:
                    s.advantage = a
            trajs += group
        return trajs

    def _micro(self, samples: list[Sample]) -> list[list[Sample]]:
        size = max(1, self.cfg.grpo.micro_batch_size)
        return [samples[i : i + size] for i in range(0, len(samples), size)]

    def _update(self, trajs: list[Trajectory]) -> dict[str, float]:
        import torch

        cfg, acc = self.cfg, self.acc
        groups = [
            trajs[i : i + cfg.rollout.group_size]
            for i in range(0, len(trajs), cfg.rollout.group_size)
        ]
        per_mini = max(1, cfg.grpo.mini_batch_size // acc.num_processes)
        minis = [
            [s for g in groups[i : i + per_mini] for t in g for s in trained_samples(t)]
            for i in range(0, len(groups), per_mini)
        ]
        pad, temp = self.tokenizer.pad_token_id, cfg.rollout.temperature
        self.model.eval()
        off_policy = cfg.grpo.ppo_epochs > 1 or len(minis) > 1
        for mini in minis:
            for micro in self._micro(mini):
                refs = self._ref_logps(micro) if cfg.grpo.beta > 0 else None
                olds = None
                if off_policy:
                    with torch.no_grad():
                        olds = token_logps(self.model, micro, pad, temp)[0]
                for i, s in enumerate(micro):
                    s.ref_logps = None if refs is None else refs[i]
                    s.old_logps = None if olds is None else olds[i]
        self.model.train()
        sums = {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clipped": 0.0, "tokens": 0.0}
        for _ in range(cfg.grpo.ppo_epochs):
            for mini in minis:
                self._step_mini(mini, sums)
        n = max(1.0, sums.pop("tokens"))
        return {k: v / n for k, v in sums.items()}

    def _step_mini(self, mini: list[Sample], sums: dict[str, float]) -> None:
        import torch

        cfg, acc = self.cfg, self.acc
        tokens = sum(len(s.completion_ids) for s in mini)
        micros = self._micro(mini) if mini else []
        # DDP needs the same number of backward passes on every process: pad with zero-weight ones.
        count = int(acc.gather(torch.tensor([len(micros)], device=acc.device)).max().item())
        for i in range(count):
            real = i < len(micros)
            micro = micros[i] if real else micros[0] if micros else []
            if not micro:
                continue
            logps, mask, ent = token_logps(
                self.model,
                micro,
                self.tokenizer.pad_token_id,
                cfg.rollout.temperature,
                entropy=True,
            )
            c = mask.shape[1]

            old = _stack([s.old_logps for s in micro], c, logps.detach())
            ref = _stack([s.ref_logps for s in micro], c, logps.detach()) if cfg.grpo.beta else None
            adv = torch.tensor([[s.advantage] for s in micro], device=logps.device)
            loss_t, kl, clipped = grpo_token_loss(
                logps, old, ref, adv, cfg.grpo.clip_eps, cfg.grpo.beta
            )
            loss = (loss_t * mask).sum() / max(1, tokens) * (1.0 if real else 0.0)
            ctx = acc.no_sync(self.model) if i < count - 1 else contextlib.nullcontext()
            with ctx:
                acc.backward(loss)
            if real:
                m = mask.sum().item()
                sums["loss"] += (loss_t * mask).sum().item()
                sums["kl"] += (kl * mask).sum().item()
                sums["entropy"] += (ent * mask).sum().item()
                sums["clipped"] += (clipped.float() * mask).sum().item()
                sums["tokens"] += m
        if cfg.optim.grad_clip > 0:
            acc.clip_grad_norm_(self.model.parameters(), cfg.optim.grad_clip)
        self.optimizer.step()
        self.optimizer.zero_grad()

    def run(self) -> TrainReport:
        cfg, acc = self.cfg, self.acc
        self.out.mkdir(parents=True, exist_ok=True)
        rows_path = self.out / "metrics.jsonl"
        if acc.is_main_process:
            metrics.truncate_after(rows_path, self.start)  # rows past the checkpoint go
            (self.out / "config.json").write_text(cfg.model_dump_json(indent=2), encoding="utf-8")
        if self.start:
            self.log(f"resuming from {self.resume} (step {self.start})")
        last = self.resume
        for step in range(self.start + 1, self.total_steps + 1):
            t0 = time.monotonic()
            trajs = self._collect(step)
            stats = self._update(trajs)
            row = self._row(step, trajs, stats, time.monotonic() - t0)
            if acc.is_main_process:
                metrics.append_row(rows_path, row)
                self.log(_line(row, self.total_steps))
            if step % cfg.run.save_every == 0 or step == self.total_steps:
                last = self._save(step)
        plot = None
        if acc.is_main_process and (rows := metrics.read_rows(rows_path)):
            plot = metrics.plot(rows, self.out / "metrics.png")
        return TrainReport(self.out, self.total_steps, self.start, last, plot)

    def _save(self, step: int) -> Path | None:
        self.acc.wait_for_everyone()
        if not self.acc.is_main_process:
            return None
        return checkpoint.save(
            self.out,
            step,
            model=self.acc.unwrap_model(self.model),
            tokenizer=self.tokenizer,
            optimizer=self.optimizer,
            base_model=self.base,
            state={
                "epoch": (step - 1)
                // max(1, math.ceil(len(self.train_set) / self.cfg.grpo.batch_size)),
                "config": self.cfg.model_dump(),
            },
            keep=self.cfg.run.keep_checkpoints,
        )

    def _row(
        self, step: int, trajs: list[Trajectory], stats: dict[str, float], seconds: float
    ) -> dict[str, Any]:
        import torch

        local = [
            [
                t.reward.total,
                t.reward.format,
                t.reward.answer,
                t.master_tokens,
                len(t.episode.turns) if t.episode else 0,
                1.0 if t.reason in ("answered", "forced_answer") else 0.0,
                t.simulator_calls,
                t.rejected,
            ]
            for t in trajs
        ]
        stacked = self.acc.gather(torch.tensor(local, dtype=torch.float64, device=self.acc.device))
        mean = stacked.mean(0).tolist()
        return {
            "step": step,
            "reward": mean[0],
            "reward_format": mean[1],
            "reward_answer": mean[2],
            "response_length": mean[3],
            "turns": mean[4],
            "answered": mean[5],
            "simulator_calls": mean[6],  # observe / get_caption served, per episode
            "rejected_replies": mean[7],  # format retries per episode (not in the loss)
            "kl": stats.get("kl", 0.0),
            "entropy": stats.get("entropy", 0.0),
            "clip_fraction": stats.get("clipped", 0.0),
            "loss": stats.get("loss", 0.0),
            "trajectories": len(stacked),
            "seconds": round(seconds, 2),
        }


def _stack(rows: list[Any], width: int, like: Any) -> Any:
    """Per-sample ``(C_i,)`` tensors left-padded to ``(B, width)``; ``like`` when there are none."""
    import torch

    if rows[0] is None:
        return like
    padded = [torch.nn.functional.pad(r, (width - r.shape[0], 0)) for r in rows]
    return torch.stack(padded).to(like.device)


def _line(row: dict[str, Any], total: int) -> str:
    return (
        f"step {row['step']}/{total}  reward {row['reward']:.3f}  format "
        f"{row['reward_format']:.3f}  answer {row['reward_answer']:.3f}  kl {row['kl']:.2e}  "
        f"entropy {row['entropy']:.3f}  tokens {row['response_length']:.0f}  "
        f"sim calls {row.get('simulator_calls', 0.0):.2f}  "
        f"{row['seconds']:.0f}s"
    )


def train(cfg: TrainConfig, *, log: Callable[[str], None] = print) -> TrainReport:
    """Train (or resume training) the master per ``cfg``; see the module docstring."""
    return Trainer(cfg, log=log).run()
