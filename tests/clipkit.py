"""Tiny random CLIP and SigLIP models saved as a user's model directory (no weights exist offline).

The tokenizer is a CLIP byte-pair tokenizer over single letters (no merges), so any lower-case
text tokenizes; the image processor is the PIL one (no torchvision here). Random weights say
nothing about what matches what: tests check shapes, norms, determinism and plumbing.
"""

from __future__ import annotations

import string
from pathlib import Path


def build_clip(path: Path, *, kind: str = "clip", seed: int = 0, dim: int = 8) -> Path:
    """Save a tiny random ``kind`` (``clip`` or ``siglip``) model and its processor in ``path``.

    ``dim`` is the embedding length (CLIP's projection; SigLIP's hidden size, which it has none
    of). Different seeds make different models of the same shape.
    """
    import torch
    import transformers as hf

    vocab: dict[str, int] = {}
    for ch in string.ascii_lowercase:
        vocab[ch], vocab[ch + "</w>"] = len(vocab), len(vocab) + 1
    bos, eos = len(vocab), len(vocab) + 1
    vocab.update({"<|startoftext|>": bos, "<|endoftext|>": eos})
    tokenizer = hf.CLIPTokenizer(vocab=vocab, merges=[], model_max_length=16)
    hidden = dim if kind == "siglip" else 16
    text = {
        "vocab_size": len(vocab),
        "hidden_size": hidden,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "max_position_embeddings": 16,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "pad_token_id": eos,
    }
    vision = {
        "image_size": 32,
        "patch_size": 8,
        "hidden_size": hidden,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
    }
    torch.manual_seed(seed)
    if kind == "siglip":
        images = getattr(hf, "SiglipImageProcessorPil", hf.SiglipImageProcessor)(
            size={"height": 32, "width": 32}
        )
        model = hf.SiglipModel(hf.SiglipConfig(text_config=text, vision_config=vision))
        processor = hf.SiglipProcessor(image_processor=images, tokenizer=tokenizer)
    else:
        images = getattr(hf, "CLIPImageProcessorPil", hf.CLIPImageProcessor)(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        )
        config = hf.CLIPConfig(text_config=text, vision_config=vision, projection_dim=dim)
        model = hf.CLIPModel(config)
        processor = hf.CLIPProcessor(image_processor=images, tokenizer=tokenizer)
    model.eval().save_pretrained(path)
    processor.save_pretrained(path)
    return path
