"""The embedded llama.cpp adapter's load options."""

from __future__ import annotations

from pathlib import Path

import pytest

from vidagent.exceptions import ConfigError
from vidagent.models.registry import module_available

pytestmark = pytest.mark.skipif(
    not module_available("llama_cpp"), reason="vidagent[llm] not installed"
)


@pytest.mark.models
def test_flash_attention_is_on_unless_the_spec_turns_it_off() -> None:
    import llama_cpp

    from vidagent.models.llamacpp import LlamaCppAdapter

    for options, kind in (
        ({}, llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED),
        ({"flash_attn": "0"}, llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED),
    ):
        llm = LlamaCppAdapter("smollm2-135m", {"n_ctx": "512", **options})
        try:
            assert llm._load().context_params.flash_attn_type == kind
        finally:
            llm.close()
    with pytest.raises(ConfigError, match="flash_attn='maybe' must be 0 or 1"):
        LlamaCppAdapter("smollm2-135m", {"flash_attn": "maybe"})


def test_a_file_that_is_no_gguf_model_is_one_line_at_once_and_a_bad_gguf_at_its_load(
    tmp_path: Path,
) -> None:
    from vidagent.config import load_settings
    from vidagent.models.llamacpp import LlamaCppAdapter, status

    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    with pytest.raises(ConfigError, match=f"^llamacpp:{text}: not a GGUF model file$"):
        LlamaCppAdapter(str(text))
    assert status(str(text), {}, load_settings(env={})).detail == "not a GGUF model file"
    broken = tmp_path / "broken.gguf"  # the magic, then nothing llama.cpp can read
    broken.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\x00" * 64)
    llm = LlamaCppAdapter(str(broken))
    with pytest.raises(ConfigError, match=f"^llamacpp:{broken}: llama.cpp cannot load it"):
        llm._load()
