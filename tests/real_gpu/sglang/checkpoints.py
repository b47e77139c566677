"""Tiny random-weight checkpoints for the real-SGLang run, made on the spot in a few seconds.

    python3 checkpoints.py OUTDIR

OUTDIR/tokenizer   a byte-level BPE tokenizer trained here on a few lines of text, with a ChatML template
OUTDIR/trap-fp8    a 2-layer Qwen3 in ModelOpt FP8 layout: FP8 weights with per-tensor scales, config.json
                   WITHOUT quantization_config, hf_quant_config.json saying kv_cache_quant_algo FP8, and no
                   k/v scale tensors. SGLang reads the quantization from hf_quant_config.json, so `auto` gives
                   an FP8 KV cache with scales of 1.0: the reference deployment's trap in miniature.
OUTDIR/hybrid      a 4-layer Qwen3-Next (gated delta-net linear attention every layer but each second one,
                   MoE), unquantized bf16: SGLang serves it with a Mamba state pool beside the KV pool.

Weights are random (seeded): the models answer nonsense, which the accuracy canary must say.
"""

import json
import os
import shutil
import sys

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM, Qwen3NextConfig, Qwen3NextForCausalLM

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
CORPUS = [
    "def f(xs):\n    total = 0\n    for i, x in enumerate(xs):\n        total += x * i\n    return total\n",
    "What is the value of the needle? Answer with the value only. # needle: 7 4 1 9 0 3\n",
    "The KV cache holds the keys and values of every token in flight; FP8 halves it, bf16 keeps precision.\n",
    "Large language models serve requests in batches; the scheduler keeps the GPU busy.\n",
]
VOCAB = 1024          # model rows; the tokenizer uses fewer
FP8_MAX = 448.0       # largest float8_e4m3fn value
SEED = 20261201


def make_tokenizer(out):
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS * 40, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(out)
    return tok


def token_ids(tok):
    return {"eos_token_id": tok.convert_tokens_to_ids("<|im_end|>"), "pad_token_id": tok.convert_tokens_to_ids("<|endoftext|>"),
            "bos_token_id": None}


def copy_tokenizer(src, out):
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(src):
        shutil.copy(os.path.join(src, name), out)


def finish_config(out, extra):
    """Both dtype spellings (transformers 5 writes `dtype`, older readers want `torch_dtype`) plus extra keys."""
    path = os.path.join(out, "config.json")
    with open(path) as fh:
        cfg = json.load(fh)
    cfg.update({"dtype": "bfloat16", "torch_dtype": "bfloat16"}, **extra)
    with open(path, "w") as fh:
        json.dump(cfg, fh, indent=2, sort_keys=True)
    return cfg


def fp8_per_tensor(weight):
    """(float8_e4m3fn weight, float32 scalar scale) such that weight ~= fp8 * scale."""
    scale = weight.float().abs().max().clamp(min=1e-8) / FP8_MAX
    return (weight.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), scale.reshape(()).to(torch.float32)


def make_trap(out, tok_dir, tok):
    copy_tokenizer(tok_dir, out)
    config = Qwen3Config(vocab_size=VOCAB, hidden_size=256, intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=64, max_position_embeddings=8192, tie_word_embeddings=False,
                         architectures=["Qwen3ForCausalLM"], **token_ids(tok))
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    tensors = {}
    for name, weight in model.state_dict().items():
        # every linear layer of the decoder goes FP8 (static per-tensor scales, as ModelOpt writes them);
        # embeddings, norms and lm_head stay bf16. No k_scale / v_scale: that is the trap.
        if ".layers." in name and name.endswith("_proj.weight"):
            stem = name[:-len("weight")]
            tensors[name], tensors[stem + "weight_scale"] = fp8_per_tensor(weight)
            tensors[stem + "input_scale"] = torch.ones((), dtype=torch.float32)
        else:
            tensors[name] = weight.contiguous()
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(out)
    cfg = finish_config(out, {})
    if "quantization_config" in cfg:
        raise SystemExit("trap checkpoint: config.json must not carry quantization_config")
    quant = {"producer": {"name": "modelopt", "version": "0.29.0"},
             "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8", "exclude_modules": ["lm_head"]}}
    with open(os.path.join(out, "hf_quant_config.json"), "w") as fh:
        json.dump(quant, fh, indent=2)


def make_hybrid(out, tok_dir, tok):
    copy_tokenizer(tok_dir, out)
    config = Qwen3NextConfig(vocab_size=VOCAB, hidden_size=256, intermediate_size=512, num_hidden_layers=4, num_attention_heads=4,
                             num_key_value_heads=2, head_dim=64, linear_num_value_heads=4, linear_num_key_heads=2,
                             linear_key_head_dim=64, linear_value_head_dim=64, linear_conv_kernel_dim=4, num_experts=4,
                             num_experts_per_tok=2, moe_intermediate_size=128, shared_expert_intermediate_size=128,
                             full_attention_interval=2, max_position_embeddings=8192, tie_word_embeddings=False,
                             architectures=["Qwen3NextForCausalLM"], **token_ids(tok))
    model = Qwen3NextForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    # SGLang's own Qwen3-Next config reads full_attention_interval; transformers 5 keeps only layer_types
    finish_config(out, {"full_attention_interval": 2})


def main(argv):
    if len(argv) != 2:
        raise SystemExit("usage: checkpoints.py OUTDIR")
    out = argv[1]
    torch.manual_seed(SEED)
    tok_dir = os.path.join(out, "tokenizer")
    tok = make_tokenizer(tok_dir)
    for name, make in (("trap-fp8", make_trap), ("hybrid", make_hybrid)):
        path = os.path.join(out, name)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        make(path, tok_dir, tok)
        print("%s: %s" % (path, ", ".join(sorted(os.listdir(path)))))


if __name__ == "__main__":
    main(sys.argv)
