"""examples/distributed/tensor_parallel.py under torchrun: two ranks (gloo, the simulator) match one process;
the shard split refuses a world size that does not divide the heads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch", reason="torch (torch.distributed) is not installed")
ROOT = Path(__file__).resolve().parent.parent

from example_modules import import_example  # noqa: E402

(tensor_parallel,) = import_example("distributed", "tensor_parallel", also=("llama",))
config, weights = import_example("llama", "config", "weights")
shard, CONFIGS, random_weights = tensor_parallel.shard, config.CONFIGS, weights.random_weights


def test_two_ranks_match_one_process():
    env = {**os.environ, "TINYTON_BACKEND": "sim", "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
               str(ROOT / "examples" / "distributed" / "tensor_parallel.py"), "--steps", "4"]  # fmt: skip
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "max abs difference" in out.stdout and out.stdout.strip().endswith("OK")


def test_shards_split_heads_and_mlp():
    cfg = CONFIGS["tiny"]
    weights = random_weights(cfg)
    a, b = shard(cfg, weights, 0, 2), shard(cfg, weights, 1, 2)
    assert a[0]["q_proj"].shape == (cfg.hidden_size // 2, cfg.hidden_size)
    assert a[0]["down_proj"].shape == (cfg.hidden_size, cfg.intermediate_size // 2)
    assert (a[0]["k_proj"] != b[0]["k_proj"]).any()
    with pytest.raises(ValueError, match="world of 4 ranks does not divide 2 key/value heads"):
        shard(cfg, weights, 0, 4)


def test_one_rank_prefill_gives_the_reference_logits(tmp_path):
    """The prompt's programs (causal attention over its own rows) on one gloo rank: the last position's logits
    are the one-process model's."""
    import numpy as np
    import torch.distributed as dist

    cfg = CONFIGS["tiny"]
    weights = random_weights(cfg, seed=0)
    tokens = np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 6)).astype(np.int32)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        model = tensor_parallel.Rank(cfg, weights, tokens, 0, 1, "cpu")
        got = model.prefill(6).float().numpy()
    finally:
        dist.destroy_process_group()
    want = tensor_parallel.reference_logits(cfg, weights, tokens)[-1]
    assert np.abs(got - want).max() <= tensor_parallel.TOLERANCE * np.abs(want).max()
