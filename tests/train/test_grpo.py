"""GRPO on a tiny random chat model: the loss, the masking, a training run, resume after SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from tinylm import build_tiny_lm

from vidagent.exceptions import ConfigError
from vidagent.train import checkpoint
from vidagent.train.config import load_config
from vidagent.train.evaluate import majority_baseline
from vidagent.train.grpo import (
    Trainer,
    batch_for,
    check_resume,
    grpo_token_loss,
    split_scripts,
    train,
    trained_samples,
)
from vidagent.train.metrics import read_rows
from vidagent.train.policy import (
    Generator,
    Sample,
    load_causal_lm,
    load_tokenizer,
    token_logps,
)
from vidagent.train.rollout import rollout
from vidagent.train.templates import generate

ANSWER_A = '{"action": "answer", "thought": "t", "final_answer": "A"}'
OBSERVE_ALL = (
    '{"action": "observe", "thought": "look", "params": {"observation_targets": '
    '[{"video_index": 1, "start_time": 0, "end_time": 60}], "focus_prompt": "What happens?"}}'
)


class Scripted(Generator):
    """A Generator whose replies are scripted (each still recorded as a Sample of the model)."""

    def __init__(self, model: object, tokenizer: object, replies: list[str]) -> None:
        super().__init__(model, tokenizer)
        self.replies = list(replies)

    def __call__(self, messages: list[dict[str, str]]) -> str:
        reply = self.replies.pop(0)
        ids = self.tokenizer(reply, add_special_tokens=False)["input_ids"]
        self.samples.append(Sample(self.prompt_ids(messages)[-16:], list(ids)))
        return reply


@pytest.fixture
def valid_sometimes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tiny random model never writes a valid action, and GRPO trains only on accepted
    replies: let every other generation be read as a valid answer (its tokens stay the model's)."""
    real = Generator.__call__
    count = iter(range(10**6))

    def call(self: Generator, messages: list[dict[str, str]]) -> str:
        text = real(self, messages)
        return ANSWER_A if next(count) % 2 else text

    monkeypatch.setattr(Generator, "__call__", call)


TINY = """
[data]
tasks = ["NC", "PSS"]
template_per_task = 4
heldout = 2
[rollout]
group_size = 2
max_new_tokens = 8
max_turns = 2
[grpo]
batch_size = 2
mini_batch_size = 1
micro_batch_size = 4
max_steps = {steps}
[optim]
lr = 0.01
[run]
save_every = 1
keep_checkpoints = {keep}
threads = 1
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_lm(tmp_path_factory.mktemp("tinylm"))


def config_file(tmp_path: Path, model: Path, steps: int = 2, keep: int = 2) -> Path:
    out = tmp_path / "run"
    path = tmp_path / "tiny.toml"
    body = TINY.format(steps=steps, keep=keep).replace(
        "[data]", f'[model]\nname = "{model}"\n[data]'
    )
    path.write_text(body + f'output_dir = "{out}"\n', encoding="utf-8")
    return path


def test_the_clipped_objective_and_the_k3_kl() -> None:
    logps = torch.log(torch.tensor([[0.5, 0.5]]))
    old = torch.log(torch.tensor([[0.25, 0.5]]))  # ratio 2 then 1
    loss, kl, clipped = grpo_token_loss(logps, old, logps.clone(), torch.tensor([[1.0]]), 0.2, 0.1)
    assert loss[0].tolist() == pytest.approx([-1.2, -1.0])  # positive advantage: ratio capped
    assert kl[0].tolist() == pytest.approx([0.0, 0.0]) and clipped.tolist() == [[True, False]]
    loss, _, _ = grpo_token_loss(logps, old, None, torch.tensor([[-1.0]]), 0.2, 0.1)
    assert loss[0].tolist() == pytest.approx([2.0, 1.0])  # negative advantage: no cap below
    ref = torch.log(torch.tensor([[0.25, 0.5]]))
    _, kl, _ = grpo_token_loss(logps, logps, ref, torch.tensor([[0.0]]), 0.2, 0.1)
    assert kl[0, 0].item() == pytest.approx(0.5 - torch.log(torch.tensor(0.5)).item() - 1)


def test_only_the_master_s_tokens_are_scored(tiny: Path) -> None:
    model, tok = load_causal_lm(str(tiny)), load_tokenizer(str(tiny))
    gen = Generator(model, tok, temperature=1.0, max_new_tokens=6)
    torch.manual_seed(0)
    gen(
        [
            {"role": "system", "content": "Act."},
            {"role": "user", "content": "[TOOL OBS] long " * 20},
        ]
    )
    sample = gen.samples[0]
    short = Sample(sample.prompt_ids[-5:], sample.completion_ids[:3])
    logps, mask, ent = token_logps(model, [sample, short], tok.pad_token_id, 1.0, entropy=True)
    n = len(sample.completion_ids)
    assert logps.shape == mask.shape == ent.shape == (2, n)
    assert mask[0].tolist() == [1.0] * n and mask[1].tolist() == [0.0] * (n - 3) + [1.0] * 3
    # Left padding keeps every completion's log-probabilities what they are alone.
    alone, _, _ = token_logps(model, [sample], tok.pad_token_id, 1.0)
    assert torch.allclose(alone[0], logps[0], atol=1e-5)


def test_a_positive_advantage_makes_the_sampled_reply_likelier(tiny: Path) -> None:
    model, tok = load_causal_lm(str(tiny)), load_tokenizer(str(tiny))
    sample = Sample(tok("<|im_start|>user\nWhich video?")["input_ids"], tok(' "B"}')["input_ids"])
    before, mask, _ = token_logps(model, [sample], tok.pad_token_id, 1.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    loss, _, _ = grpo_token_loss(before, before.detach(), None, torch.tensor([[1.0]]), 0.2, 0.0)
    ((loss * mask).sum() / mask.sum()).backward()
    opt.step()
    after, _, _ = token_logps(model, [sample], tok.pad_token_id, 1.0)
    assert after.sum().item() > before.sum().item()


def test_the_held_out_set_is_balanced_and_reports_its_majority_baseline() -> None:
    cfg = load_config(Path(__file__).parents[2] / "configs" / "train" / "cpu.toml")
    assert cfg.rollout.max_turns >= 3  # the CPU run lets the master observe
    train_set, held = split_scripts(cfg)
    assert len(held) == cfg.data.heldout == 8
    assert not {s["id"] for s in held} & {s["id"] for s in train_set}
    assert Counter(s["answer"] for s in held) == {"A": 2, "B": 2, "C": 2, "D": 2}
    assert majority_baseline(held) == ("A", 0.25)
    assert max(Counter(s["answer"] for s in train_set).values()) / len(train_set) <= 0.3
    assert majority_baseline([{"answer": "B"}, {"answer": "C"}, {"answer": "B"}]) == ("B", 2 / 3)


def test_batches_walk_a_shuffle_per_epoch() -> None:
    data = [{"id": i} for i in range(5)]
    epoch = [d["id"] for s in (1, 2, 3) for d in batch_for(s, data, 2, seed=0)]
    assert sorted(epoch[:5]) == [0, 1, 2, 3, 4]  # steps 1-3 cover the set (the last wraps)
    assert batch_for(2, data, 2, 0) == batch_for(2, data, 2, 0)


def test_rejected_format_attempts_stay_out_of_the_loss(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tok = load_causal_lm(str(tiny)), load_tokenizer(str(tiny))
    nc = generate("NC", 1)[0]
    # Turn 1: prose (refused), then an observe; turn 2 (forced): an observe (refused), an answer.
    gen = Scripted(
        model,
        tok,
        ["I will look first.", OBSERVE_ALL, OBSERVE_ALL.replace("What", "Who"), ANSWER_A],
    )
    traj = rollout(nc, gen, max_turns=2, generic=True)
    assert [s.rejected for s in traj.samples] == [True, False, True, False]
    assert traj.rejected == 2 and traj.simulator_calls == 1 and traj.reward.format == 0.0
    accepted = trained_samples(traj)
    assert [s.completion_ids for s in accepted] == [traj.samples[1].completion_ids] + [
        traj.samples[3].completion_ids
    ]
    # Every sample the update scores (old, reference and current log-probabilities) is accepted,
    # though the retried trajectory has the group's positive advantage.
    three = Scripted(model, tok, ["nope", "nope", "nope"])
    failed = rollout(nc, three, max_turns=1, generic=True)
    assert failed.rejected == 3 and not trained_samples(failed)
    trainer = Trainer(load_config(config_file(tmp_path, tiny, steps=1)), log=lambda _l: None)
    for s in traj.samples:
        s.advantage = 1.0
    for s in failed.samples:
        s.advantage = -1.0
    scored: list[list[int]] = []
    real = token_logps

    def spy(model: object, samples: list[Sample], *a: object, **k: object) -> object:
        scored.extend(s.completion_ids for s in samples)
        return real(model, samples, *a, **k)

    monkeypatch.setattr("vidagent.train.grpo.token_logps", spy)
    stats = trainer._update([traj, failed])
    assert scored and all(ids in [s.completion_ids for s in accepted] for ids in scored)
    rejected = [s.completion_ids for s in traj.samples + failed.samples if s.rejected]
    assert not any(ids in scored for ids in rejected)
    assert stats["loss"] != 0.0


@pytest.mark.usefixtures("valid_sometimes")
def test_a_short_run_logs_every_metric_checkpoints_and_plots(tiny: Path, tmp_path: Path) -> None:
    cfg = load_config(config_file(tmp_path, tiny, steps=2, keep=1))
    lines: list[str] = []
    report = train(cfg, log=lines.append)
    rows = read_rows(report.output_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for key in (
        "reward",
        "reward_format",
        "reward_answer",
        "kl",
        "entropy",
        "response_length",
        "simulator_calls",
        "rejected_replies",
    ):
        assert isinstance(rows[0][key], float), key
    assert rows[0]["trajectories"] == 4 and rows[0]["response_length"] > 0
    assert rows[0]["rejected_replies"] > 0 and rows[0]["simulator_calls"] == 0.0
    assert rows[0]["entropy"] > 0 and rows[1]["kl"] >= 0
    assert [p.name for p in checkpoint.checkpoints(report.output_dir)] == ["step-000002"]
    assert report.plot is not None and report.plot.read_bytes()[:4] == b"\x89PNG"
    assert lines[0].startswith("step 1/2  reward ")
    # The checkpoint is a from_pretrained folder that differs from the start (it trained).
    trained = load_causal_lm(str(report.checkpoint))
    start = load_causal_lm(str(tiny))
    diff = [
        (a - b).abs().max().item()
        for a, b in zip(trained.parameters(), start.parameters(), strict=False)
    ]
    assert max(diff) > 0


def test_the_kl_reference_is_the_initial_policy_and_stays_put(tiny: Path, tmp_path: Path) -> None:
    """Without a resumed checkpoint the reference is a copy of the policy before its first
    step (not a second load of the same weights): equal to the model on disk, its own
    tensors, frozen, and unmoved when the policy moves; a resumed run loads it from the start."""
    cfg = load_config(config_file(tmp_path, tiny, steps=2, keep=1))
    start = list(load_causal_lm(str(tiny)).parameters())
    trainer = Trainer(cfg, log=lambda _line: None)
    assert trainer.ref is not None
    policy = list(trainer.acc.unwrap_model(trainer.model).parameters())
    reference = list(trainer.ref.parameters())
    assert all(torch.equal(r, s) for r, s in zip(reference, start, strict=True))
    assert not {r.data_ptr() for r in reference} & {p.data_ptr() for p in policy}
    assert not any(r.requires_grad for r in reference)
    with torch.no_grad():  # a step that moves every weight of the policy
        for weight in policy:
            weight.add_(1.0)
    assert all(torch.equal(r, s) for r, s in zip(trainer.ref.parameters(), start, strict=True))
    trainer.run()  # leaves a checkpoint to resume from
    resumed = Trainer(load_config(config_file(tmp_path, tiny, steps=3, keep=1)), log=print)
    assert resumed.resume is not None and resumed.ref is not None
    assert all(torch.equal(r, s) for r, s in zip(resumed.ref.parameters(), start, strict=True))


def test_bad_configs_are_one_line_errors(tiny: Path, tmp_path: Path) -> None:
    path = config_file(tmp_path, tiny)
    with pytest.raises(ConfigError, match=r"rollout.group_siz: Extra inputs"):
        load_config(path, {"rollout.group_siz": 4})
    with pytest.raises(ConfigError, match="at least 2"):
        load_config(path, {"rollout.group_size": 1})
    with pytest.raises(ConfigError, match="no training config at"):
        load_config(tmp_path / "none.toml")
    # counts a loop divides by or steps through, and shares, are checked before any work
    for key, value in [
        ("warmup.check_every", 0),
        ("warmup.stop_at", 1.5),
        ("grpo.mini_batch_size", 0),
        ("rollout.max_turns", 0),
        ("run.save_every", 0),  # a step's checkpoint divided by it: the step was lost
        ("run.keep_checkpoints", 0),
        ("run.threads", -1),
        ("data.heldout", -1),
        ("data.template_per_task", 0),
        ("optim.lr", 0),
        ("rollout.temperature", -1),
        ("grpo.clip_eps", 0),
        ("grpo.beta", -0.1),
    ]:
        # blamed on the --set that gave it, not on the file
        with pytest.raises(ConfigError, match="^--set " + key.replace(".", r"\.")):
            load_config(path, {key: value})
    zero = tmp_path / "zero.toml"
    zero.write_text(path.read_text().replace("save_every = 1", "save_every = 0"))
    with pytest.raises(ConfigError, match=f"^{zero}: run.save_every"):  # and in the file
        load_config(zero)
    odd = tmp_path / "odd.toml"
    odd.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(odd)
    with pytest.raises(ConfigError, match="cannot read the training config"):
        load_config(tmp_path)


def test_a_run_is_resumed_only_under_the_settings_it_trained_with(
    tiny: Path, tmp_path: Path
) -> None:
    cfg = load_config(config_file(tmp_path, tiny))
    out = Path(cfg.run.output_dir)
    out.mkdir(parents=True)
    (out / "config.json").write_text(cfg.model_dump_json(), encoding="utf-8")
    # how long it trains, saves and runs may change; what a step does may not (the run's
    # config.json was overwritten with the new group size and learning rate, describing
    # steps it did not train that way)
    longer = {"grpo.max_steps": 99, "run.keep_checkpoints": 5, "run.threads": 1}
    check_resume(out, load_config(config_file(tmp_path, tiny), longer))
    changed = load_config(config_file(tmp_path, tiny), {"rollout.group_size": 3})
    with pytest.raises(ConfigError, match=r"with rollout\.group_size = 2, not 3; resume it"):
        check_resume(out, changed)


def test_a_killed_run_resumes_from_its_last_checkpoint_without_duplicate_rows(
    tiny: Path, tmp_path: Path
) -> None:
    path = config_file(tmp_path, tiny, steps=4, keep=5)
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "vidagent", "train", "cvr", "--config", str(path)]
    env = {**os.environ, "VIDAGENT_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(6000):  # until step 2's checkpoint exists, then SIGKILL
            if (out / "checkpoints" / "step-000002" / "trainer_state.json").is_file():
                break
            if proc.poll() is not None:
                pytest.fail("training ended before it could be killed")
            time.sleep(0.1)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
    killed_at = [int(p.name[5:]) for p in checkpoint.checkpoints(out)][-1]
    assert 2 <= killed_at < 4
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert f"(step {killed_at})" in done.stdout
    assert f"trained {4 - killed_at} step" in done.stdout
    assert f"now (4 in all, resumed from step {killed_at})" in done.stdout
    assert [r["step"] for r in read_rows(out / "metrics.jsonl")] == [1, 2, 3, 4]
    assert [p.name for p in checkpoint.checkpoints(out)][-1] == "step-000004"
    assert not list((out / "checkpoints").glob(".tmp-*"))
