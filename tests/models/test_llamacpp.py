"""The embedded llama.cpp adapter's load options."""

from __future__ import annotations

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
