"""Weights of a Llama model: Hugging Face names, random initialisation, and `*.safetensors` checkpoints.

A checkpoint directory holds `config.json` and one or more `*.safetensors` files with the Hugging Face
tensor names (`model.layers.0.self_attn.q_proj.weight`, ...). Loading checks every name and shape against
the configuration before returning anything, so a mismatched checkpoint never runs half a model.
Projection weights are stored as Hugging Face stores them, `(out, in)`: a projection is `x @ w.T`.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
from config import Config
from safetensors import safe_open
from safetensors.numpy import save_file

BF16 = np.dtype(ml_dtypes.bfloat16)
LAYER_WEIGHTS = ("input_layernorm", "q_proj", "k_proj", "v_proj", "o_proj", "post_attention_layernorm",
                 "gate_proj", "up_proj", "down_proj")  # fmt: skip


class CheckpointError(ValueError):
    """A checkpoint that does not match its configuration (the message names the file and the tensor)."""


def _layer_names(i: int) -> dict[str, str]:
    p = f"model.layers.{i}"
    attn, mlp = f"{p}.self_attn", f"{p}.mlp"
    return {
        "input_layernorm": f"{p}.input_layernorm.weight",
        "q_proj": f"{attn}.q_proj.weight", "k_proj": f"{attn}.k_proj.weight",
        "v_proj": f"{attn}.v_proj.weight", "o_proj": f"{attn}.o_proj.weight",
        "post_attention_layernorm": f"{p}.post_attention_layernorm.weight",
        "gate_proj": f"{mlp}.gate_proj.weight", "up_proj": f"{mlp}.up_proj.weight",
        "down_proj": f"{mlp}.down_proj.weight",
    }  # fmt: skip


def weight_shapes(cfg: Config) -> dict[str, tuple[int, ...]]:
    """Every tensor of the model by Hugging Face name, in the order the model takes them."""
    c, f, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    per_layer = {
        "input_layernorm": (c,), "q_proj": (q, c), "k_proj": (kv, c), "v_proj": (kv, c), "o_proj": (c, q),
        "post_attention_layernorm": (c,), "gate_proj": (f, c), "up_proj": (f, c), "down_proj": (c, f),
    }  # fmt: skip
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, c)}
    for i in range(cfg.num_hidden_layers):
        shapes.update({name: per_layer[key] for key, name in _layer_names(i).items()})
    shapes["model.norm.weight"] = (c,)
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, c)
    return shapes


class Weights:
    """The model's tensors by role: `embed`, `norm`, `lm_head` and `layers[i][role]` (roles: LAYER_WEIGHTS)."""

    def __init__(self, cfg: Config, tensors: dict[str, np.ndarray]):
        self.cfg = cfg
        self.embed = tensors["model.embed_tokens.weight"]
        self.norm = tensors["model.norm.weight"]
        self.lm_head = self.embed if cfg.tie_word_embeddings else tensors["lm_head.weight"]
        self.layers = [{role: tensors[name] for role, name in _layer_names(i).items()}
                       for i in range(cfg.num_hidden_layers)]  # fmt: skip

    def flat(self) -> list[np.ndarray]:
        """`embed, norm, lm_head`, then each layer's tensors in LAYER_WEIGHTS order (program arguments)."""
        return [self.embed, self.norm, self.lm_head, *(layer[r] for layer in self.layers for r in LAYER_WEIGHTS)]

    def named(self) -> dict[str, np.ndarray]:
        named = {"model.embed_tokens.weight": self.embed, "model.norm.weight": self.norm}
        for i, layer in enumerate(self.layers):
            named.update({name: layer[role] for role, name in _layer_names(i).items()})
        if not self.cfg.tie_word_embeddings:
            named["lm_head.weight"] = self.lm_head
        return named


def random_weights(cfg: Config, seed: int = 0, dtype: np.dtype = BF16) -> Weights:
    """Gaussian weights (std 0.02, Llama's initialiser) and unit norm scales, from a fixed seed."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in weight_shapes(cfg).items():
        w = np.ones(shape, np.float32) if len(shape) == 1 else rng.standard_normal(shape, np.float32) * 0.02
        tensors[name] = w.astype(dtype)
    return Weights(cfg, tensors)


def save_checkpoint(directory: str | Path, weights: Weights, shard_size: int = 2**30) -> None:
    """Write `config.json` and the tensors, split into `model-0000i-of-0000n.safetensors` shards."""


    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(weights.cfg.to_hf(), indent=2))
    shards: list[dict[str, np.ndarray]] = [{}]
    size = 0
    for name, tensor in weights.named().items():
        if size and size + tensor.nbytes > shard_size:
            shards.append({})
            size = 0
        shards[-1][name] = np.ascontiguousarray(tensor)
        size += tensor.nbytes
    for i, shard in enumerate(shards):
        save_file(shard, str(directory / f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"))


def load_checkpoint(directory: str | Path) -> Weights:
    """Read a checkpoint directory; every tensor's name and shape is checked before the model exists."""
    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise CheckpointError(f"{config_path}: no such file (a checkpoint directory holds config.json)")
    cfg = Config.from_hf(config_path)
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{directory}: no *.safetensors files")
    expected = weight_shapes(cfg)
    tensors: dict[str, np.ndarray] = {}
    for path in files:
        with safe_open(str(path), framework="numpy") as f:
            for name in f.keys():
                if name not in expected:
                    if name == "lm_head.weight" and cfg.tie_word_embeddings:
                        continue
                    raise CheckpointError(f"{path}: tensor {name} is not part of a {_describe(cfg)} model")
                tensor = f.get_tensor(name)
                if tuple(tensor.shape) != expected[name]:
                    raise CheckpointError(
                        f"{path}: tensor {name} has shape {tuple(tensor.shape)}, the config asks for {expected[name]}"
                    )
                tensors[name] = tensor
    missing = [name for name in expected if name not in tensors]
    if missing:
        raise CheckpointError(f"{directory}: missing tensor {missing[0]}" + (
            f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))  # fmt: skip
    return Weights(cfg, tensors)


def _describe(cfg: Config) -> str:
    return f"{cfg.num_hidden_layers}-layer, hidden {cfg.hidden_size}"
