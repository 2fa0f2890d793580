"""A tiny chat model built in the test: a 2-layer Llama with random weights and a small
byte-level BPE tokenizer with a ChatML chat template, saved as a ``from_pretrained`` folder."""

from __future__ import annotations

from pathlib import Path

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
CORPUS = [
    '{"action": "answer", "thought": "Video 2 shows it.", "final_answer": "B"}',
    (
        '{"action": "observe", "thought": "look", "params": {"observation_targets": '
        '[{"video_index": 1, "start_time": 0, "end_time": 10, "num_frames": 8}], '
        '"focus_prompt": "What happens?"}}'
    ),
    "Which video features a scene where the detective hides the brass key?",
    "[TOOL OBS] No significant action observed. Caption for Video 1",
]


def build_tiny_lm(folder: Path, seed: int = 0) -> Path:
    """Write a tiny random chat model and its tokenizer to ``folder``; return it."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    from vidagent.agents.cvr.protocol import TASKS, master_prompt

    # Trained on the master prompts so that a prompt is ~1k tokens, not ~4k bytes.
    corpus = CORPUS * 4 + [master_prompt(t) for t in TASKS]
    trainer = trainers.BpeTrainer(
        vocab_size=4000,
        special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    fast.chat_template = CHATML
    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id,
        bos_token_id=fast.bos_token_id,
    )
    LlamaForCausalLM(cfg).save_pretrained(str(folder))
    fast.save_pretrained(str(folder))
    return folder
