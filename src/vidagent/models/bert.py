"""A BERT sentence encoder in NumPy, and the same pass in plain torch: the embedded MiniLM
without sentence-transformers.

sentence-transformers imports torch and transformers before it embeds a word: about 4.4 s on
2 cores (5.9 s warm on a later run), paid by every ``vidagent search`` and ``ask`` and by
ingest, for a 22M-parameter model whose forward pass is a dozen matrix products.
:class:`NumpyBert` runs that pass with NumPy on the same files (``model.safetensors``,
``tokenizer.json``), so it loads in a fraction of a second: the runtime of a query.
:class:`TorchBert` runs it with torch's kernels, which are several times faster per text than
NumPy's (400 texts: 1.3 s against 4.6 s), after importing torch alone (1.5 s): the runtime of
ingest's bulk requests. Both give sentence-transformers' vectors (to about 1e-6; tested
against it in ``tests/models/test_bert.py``).

They serve a sentence-transformers model directory only when that directory is exactly what
they implement (:func:`supported`): a ``bert`` encoder with absolute positions and GELU, then
mean pooling, then optionally normalisation, as all-MiniLM-L6-v2 is. Anything else is left to
sentence-transformers.

Shapes: B texts, L tokens (the longest in the batch), D hidden size, H heads of D/H.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


def supported(path: Path) -> bool:
    """Whether ``path`` is a sentence-transformers directory this module computes exactly."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        types = [m["type"] for m in modules]
        config = json.loads((path / "config.json").read_text())
        pooling_dir = next(m["path"] for m in modules if m["type"] == _POOLING)
        pooling = json.loads((path / pooling_dir / "config.json").read_text())
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return False
    modes = {k for k, v in pooling.items() if k.startswith("pooling_mode") and v}
    return (
        types in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE])
        and config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
        and modes == {"pooling_mode_mean_tokens"}
        and (path / "model.safetensors").is_file()
        and (path / "tokenizer.json").is_file()
    )


def _linear(name: str, value: np.ndarray) -> bool:
    """Whether a weight is a linear layer's matrix (the embedding tables are not)."""
    linear = name.endswith((".query.weight", ".key.weight", ".value.weight", ".dense.weight"))
    return linear and value.ndim == 2


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


class NumpyBert:
    """Mean-pooled, L2-normalised BERT sentence vectors (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text())
        st_config = path / "sentence_bert_config.json"
        self.max_seq_length = int(
            json.loads(st_config.read_text()).get("max_seq_length", 512)
            if st_config.is_file()
            else config["max_position_embeddings"]
        )
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dimension = int(config["hidden_size"])
        # Linear layers' weights (out, in) transposed once, contiguous: each product is one BLAS
        # call on (B * L, in) rows.
        self.w = {
            k.removeprefix("bert."): np.ascontiguousarray(v.T) if _linear(k, v) else v
            for k, v in load_file(path / "model.safetensors").items()
        }
        self.tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        self.tokenizer.no_padding()  # batches are padded to their longest text below

    def tokenize(self, texts: list[str]) -> list[list[int]]:
        """Token ids per text, [CLS] and [SEP] included, cut at ``max_seq_length``."""
        return [e.ids for e in self.tokenizer.encode_batch(texts)]

    def encode(self, texts: list[str], batch_size: int = 64) -> np.ndarray:
        """Unit vectors of ``texts``.  # -> (N, D) float32"""
        ids = self.tokenize(texts)
        out = np.zeros((len(texts), self.dimension), np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))  # little padding per batch
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            length = max(len(ids[i]) for i in batch)
            tokens = np.zeros((len(batch), length), np.int64)  # (B, L), 0 = [PAD]
            mask = np.zeros((len(batch), length), np.float32)  # (B, L)
            for row, i in enumerate(batch):
                tokens[row, : len(ids[i])] = ids[i]
                mask[row, : len(ids[i])] = 1.0
            out[batch] = self._forward(tokens, mask)
        return out

    def _forward(self, tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(B, L) ids and mask -> (B, D) unit vectors."""
        from scipy.special import erf

        w, eps = self.w, self.eps
        b, length = tokens.shape
        x = (
            w["embeddings.word_embeddings.weight"][tokens]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )  # (B, L, D)
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        h = self.heads
        dh = x.shape[-1] // h
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]  # (B, 1, 1, L)

        def dense(v: np.ndarray, name: str) -> np.ndarray:  # (B, L, In) -> (B, L, Out)
            out = v.reshape(b * length, -1) @ w[f"{name}.weight"] + w[f"{name}.bias"]
            return out.reshape(b, length, -1)

        def heads(v: np.ndarray) -> np.ndarray:  # (B, L, D) -> (B, H, L, D/H), contiguous
            return np.ascontiguousarray(v.reshape(b, length, h, dh).transpose(0, 2, 1, 3))

        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q = heads(dense(x, f"{p}.attention.self.query"))
            k = heads(dense(x, f"{p}.attention.self.key"))
            v = heads(dense(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) * np.float32(dh**-0.5) + bias  # (B, H, L, L)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(b, length, h * dh)  # (B, L, D)
            x = _layer_norm(
                dense(context, f"{p}.attention.output.dense") + x,
                w[f"{p}.attention.output.LayerNorm.weight"],
                w[f"{p}.attention.output.LayerNorm.bias"],
                eps,
            )
            inner = dense(x, f"{p}.intermediate.dense")  # (B, L, 4D)
            inner = 0.5 * inner * (1.0 + erf(inner / np.float32(np.sqrt(2.0))))  # exact GELU
            x = _layer_norm(
                dense(inner, f"{p}.output.dense") + x,
                w[f"{p}.output.LayerNorm.weight"],
                w[f"{p}.output.LayerNorm.bias"],
                eps,
            )
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)[:, None]
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return (pooled / norms).astype(np.float32)  # (B, D)


class TorchBert(NumpyBert):
    """:class:`NumpyBert`'s forward pass in torch (see the module docstring)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        import torch

        self.t = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in self.w.items()}

    def _forward(self, tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """(B, L) ids and mask -> (B, D) unit vectors."""
        import torch
        from torch.nn import functional as F

        w, eps = self.t, self.eps
        b, length = tokens.shape
        h = self.heads
        with torch.inference_mode():
            ids = torch.from_numpy(tokens)
            keep = torch.from_numpy(mask)  # (B, L) 1.0 for a token, 0.0 for padding
            x = (
                w["embeddings.word_embeddings.weight"][ids]
                + w["embeddings.position_embeddings.weight"][:length]
                + w["embeddings.token_type_embeddings.weight"][0]
            )  # (B, L, D)
            d = x.shape[-1]
            x = F.layer_norm(
                x, (d,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps
            )
            bias = ((1.0 - keep) * torch.finfo(torch.float32).min)[:, None, None, :]  # (B,1,1,L)

            def dense(v: torch.Tensor, name: str) -> torch.Tensor:  # (B, L, In) -> (B, L, Out)
                return v @ w[f"{name}.weight"] + w[f"{name}.bias"]

            def heads(v: torch.Tensor) -> torch.Tensor:  # (B, L, D) -> (B, H, L, D/H)
                return v.reshape(b, length, h, d // h).transpose(1, 2)

            for i in range(self.layers):
                p = f"encoder.layer.{i}"
                q = heads(dense(x, f"{p}.attention.self.query"))
                k = heads(dense(x, f"{p}.attention.self.key"))
                v = heads(dense(x, f"{p}.attention.self.value"))
                context = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)  # (B,H,L,D/H)
                context = context.transpose(1, 2).reshape(b, length, d)
                x = F.layer_norm(
                    dense(context, f"{p}.attention.output.dense") + x, (d,),
                    w[f"{p}.attention.output.LayerNorm.weight"],
                    w[f"{p}.attention.output.LayerNorm.bias"], eps,
                )  # fmt: skip
                inner = F.gelu(dense(x, f"{p}.intermediate.dense"))  # (B, L, 4D), exact GELU
                x = F.layer_norm(
                    dense(inner, f"{p}.output.dense") + x, (d,),
                    w[f"{p}.output.LayerNorm.weight"], w[f"{p}.output.LayerNorm.bias"], eps,
                )  # fmt: skip
            pooled = (x * keep[:, :, None]).sum(dim=1) / keep.sum(dim=1).clamp(min=1e-9)[:, None]
            return F.normalize(pooled, dim=1).numpy().astype(np.float32)  # (B, D)
