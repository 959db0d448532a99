"""Llama-3-architecture configurations: the shapes of the published models, and a tiny one for the simulator.

Field names follow Hugging Face's `config.json` (`LlamaConfig`), so a checkpoint directory's config reads
straight into `Config.from_hf`. The RoPE of Llama 3.x scales the low frequencies (`rope_scaling` with
`rope_type: "llama3"`); TinyLlama has none.
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's frequency scaling (`rope_type: "llama3"`)."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


@dataclass(frozen=True)
class Config:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    max_position_embeddings: int
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    tie_word_embeddings: bool = False
    rope_scaling: RopeScaling | None = field(default=None)

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def group(self) -> int:
        """Query heads per key/value head (grouped-query attention)."""
        return self.num_attention_heads // self.num_key_value_heads

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size {self.hidden_size} is not a multiple of {self.num_attention_heads} heads")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"{self.num_attention_heads} attention heads do not split into {self.num_key_value_heads} kv heads"
            )

    @staticmethod
    def from_hf(path: str | Path) -> Config:
        """Read a Hugging Face `config.json` (unknown keys ignored; a missing required key is an error
        naming the file)."""
        path = Path(path)
        raw = json.loads(path.read_text())
        known = {f.name for f in fields(Config)}
        values: dict[str, Any] = {k: v for k, v in raw.items() if k in known}
        scaling = raw.get("rope_scaling")
        if scaling and scaling.get("rope_type", scaling.get("type")) == "llama3":
            values["rope_scaling"] = RopeScaling(
                **{k: scaling[k] for k in ("factor", "low_freq_factor", "high_freq_factor",
                                           "original_max_position_embeddings") if k in scaling}
            )  # fmt: skip
        elif scaling:
            raise ValueError(f"{path}: rope_scaling {scaling} is not Llama 3's (rope_type 'llama3')")
        else:
            values["rope_scaling"] = None
        required = {f.name for f in fields(Config) if f.default is MISSING}
        missing = sorted(required - set(values))
        if missing:
            raise ValueError(f"{path}: config.json lacks {', '.join(missing)}")
        return Config(**values)

    def to_hf(self) -> dict[str, Any]:
        """The `config.json` a checkpoint of this configuration carries."""
        out = asdict(self)
        if self.rope_scaling is not None:
            out["rope_scaling"] = {"rope_type": "llama3", **asdict(self.rope_scaling)}
        return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16", **out}


CONFIGS: dict[str, Config] = {
    "tiny": Config(
        vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=128, max_position_embeddings=64, rope_theta=500000.0, rope_scaling=RopeScaling(
            factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=16),
    ),
    "tinyllama-1.1b": Config(
        vocab_size=32000, hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
        intermediate_size=5632, max_position_embeddings=2048, rope_theta=10000.0,
    ),
    "llama-3.2-1b": Config(
        vocab_size=128256, hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=8192, max_position_embeddings=131072, rope_theta=500000.0, tie_word_embeddings=True,
        rope_scaling=RopeScaling(factor=32.0),
    ),
    "llama-3-8b": Config(
        vocab_size=128256, hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=14336, max_position_embeddings=8192, rope_theta=500000.0,
    ),
}  # fmt: skip
