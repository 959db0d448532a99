"""examples/llama: checkpoints round-trip through safetensors and refuse mismatches, the NumPy reference's
decode step continues its prefill, the device sampler follows greedy / top-k / top-p, and tinyton's greedy
tokens equal the NumPy reference's."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("safetensors", reason="the `safetensors` package (llama checkpoints) is not installed")

from example_modules import import_example  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import tinyton.compiler.program as program_module  # noqa: E402
import tinyton.frontend.programs as programs_module  # noqa: E402
import tinyton.lowering.fusion.matmul_tiles as tiles_module  # noqa: E402

config, generate, model, sampler, weights = import_example("llama", "config", "generate", "model", "sampler", "weights")
CONFIGS = config.CONFIGS
NumpyEngine, Sampling, TinytonEngine, main, random_prompt = (
    generate.NumpyEngine, generate.Sampling, generate.TinytonEngine, generate.main, generate.random_prompt)
NumpyOps, decode, prefill, rope_frequencies, rope_tables = (
    model.NumpyOps, model.decode, model.prefill, model.rope_frequencies, model.rope_tables)
draw, greedy_chunks, sample_numpy = sampler.draw, sampler.greedy_chunks, sampler.sample_numpy
BF16, CheckpointError, load_checkpoint, random_weights, save_checkpoint = (
    weights.BF16, weights.CheckpointError, weights.load_checkpoint, weights.random_weights, weights.save_checkpoint)

TINY = CONFIGS["tiny"]


def test_checkpoint_round_trip(tmp_path):
    weights = random_weights(TINY, seed=1)
    save_checkpoint(tmp_path, weights, shard_size=20_000)  # several shards
    assert len(list(tmp_path.glob("*.safetensors"))) > 1
    loaded = load_checkpoint(tmp_path)
    assert loaded.cfg == TINY
    for a, b in zip(weights.flat(), loaded.flat()):
        assert a.dtype == b.dtype and np.array_equal(a.view(np.uint16), b.view(np.uint16))


def test_hf_config_fields_and_tied_embeddings(tmp_path):
    cfg = replace(TINY, tie_word_embeddings=True)
    save_checkpoint(tmp_path, random_weights(cfg))
    raw = json.loads((tmp_path / "config.json").read_text())
    assert raw["rope_scaling"]["rope_type"] == "llama3" and raw["num_key_value_heads"] == 2
    loaded = load_checkpoint(tmp_path)
    assert loaded.lm_head is loaded.embed


@pytest.mark.parametrize("damage, message", [
    ("shape", "tensor model.layers.0.self_attn.k_proj.weight has shape (64, 64), the config asks for (32, 64)"),
    ("extra", "tensor model.layers.9.mlp.up_proj.weight is not part of"),
    ("missing", "missing tensor model.norm.weight"),
])  # fmt: skip
def test_mismatched_checkpoint_names_file_and_tensor(tmp_path, damage, message):
    named = random_weights(TINY).named()
    if damage == "shape":
        named["model.layers.0.self_attn.k_proj.weight"] = named["model.layers.0.self_attn.q_proj.weight"]
    elif damage == "extra":
        named["model.layers.9.mlp.up_proj.weight"] = named["model.layers.0.mlp.up_proj.weight"]
    else:
        del named["model.norm.weight"]
    (tmp_path / "config.json").write_text(json.dumps(TINY.to_hf()))
    save_file(named, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match="model.safetensors|missing") as info:
        load_checkpoint(tmp_path)
    assert message in str(info.value)


def test_missing_files_are_named(tmp_path):
    with pytest.raises(CheckpointError, match="config.json: no such file"):
        load_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 64}))
    with pytest.raises(ValueError, match="config.json lacks .*vocab_size"):
        load_checkpoint(tmp_path)


def test_prompt_longer_than_context_is_refused(capsys):
    with pytest.raises(SystemExit):
        main(["--config", "tiny", "--prompt-tokens", "60", "--tokens", "8", "--device", "cpu"])
    assert "exceed the model's context of 64 positions" in capsys.readouterr().err


def test_rope_frequencies_follow_llama3_scaling():
    plain = rope_frequencies(replace(TINY, rope_scaling=None))
    scaled = rope_frequencies(TINY)
    s = TINY.rope_scaling
    wavelen = 2 * np.pi / plain
    assert np.allclose(scaled[wavelen < s.original_max_position_embeddings / s.high_freq_factor],
                       plain[wavelen < s.original_max_position_embeddings / s.high_freq_factor])  # fmt: skip
    long = wavelen > s.original_max_position_embeddings / s.low_freq_factor
    assert long.any() and np.allclose(scaled[long], plain[long] / s.factor)


def test_numpy_decode_continues_prefill():
    weights, cfg = random_weights(TINY).flat(), TINY
    prompt = random_prompt(cfg, 2, 9, seed=3)
    cos, sin = rope_tables(cfg, 16)
    shape = (2, cfg.num_key_value_heads, 16, cfg.head_dim)
    full_caches = [np.zeros(shape, BF16) for _ in range(2 * cfg.num_hidden_layers)]
    full = prefill(NumpyOps, cfg, prompt, cos[:9], sin[:9], *weights, *full_caches)
    caches = [np.zeros(shape, BF16) for _ in range(2 * cfg.num_hidden_layers)]
    prefill(NumpyOps, cfg, prompt[:, :8], cos[:8], sin[:8], *weights, *caches)
    step = decode(NumpyOps, cfg, prompt[:, 8], np.array([8], np.int32), cos, sin, *weights, *caches)
    np.testing.assert_allclose(step, full, rtol=0.02, atol=0.02)  # cached keys are bf16-rounded
    for i in (0, cfg.num_hidden_layers):  # the first layer's key and value rows at 8: the step's as the prefill's
        np.testing.assert_array_equal(caches[i][:, :, :9].astype(np.float32), full_caches[i][:, :, :9].astype(np.float32))


def _draw(logits, temperature=0.0, top_k=0, top_p=1.0, pos=4):
    b, v = logits.shape
    token, out = np.zeros(b, np.int32), np.zeros((b, pos + 2), np.int32)
    best, at = np.zeros((b, greedy_chunks(v)), np.float32), np.zeros((b, greedy_chunks(v)), np.int32)
    draw(logits, token, out, np.array([pos], np.int32), best, at, Sampling(temperature, top_k, top_p, seed=7), v,
         pos + 2)  # fmt: skip
    assert np.array_equal(out[:, pos + 1], token)
    return token


def test_greedy_sampler_is_first_argmax_over_chunks():
    logits = np.random.default_rng(0).standard_normal((4, 5000)).astype(np.float32)
    logits[1, 4500] = logits[1, 2100] = 9.0  # a tie across chunks: the first wins
    logits[2, 1124] = logits[2, 100] = 9.0  # ... inside one chunk
    logits[3, 4999] = 9.0  # the last entry of the last, partial chunk
    np.testing.assert_array_equal(_draw(logits), logits.argmax(-1))
    none = np.full((1, 5000), -np.inf, np.float32)
    np.testing.assert_array_equal(_draw(none), [0])


def test_top_k_top_p_draws_stay_in_the_nucleus():
    rng = np.random.default_rng(1)
    row = (rng.standard_normal(1500) * 2).astype(np.float32)
    logits = np.repeat(row[None], 64, axis=0)  # 64 draws of one distribution (one per program)
    got = _draw(logits, temperature=0.8, top_k=6, top_p=0.7)
    order = np.argsort(-row)
    p = np.exp((row[order] - row[order[0]]) / 0.8)
    p /= p.sum()
    keep = min(6, int(np.searchsorted(np.cumsum(p), 0.7)) + 1)
    assert set(got) <= set(order[:keep]) and len(set(got)) > 1
    reference = sample_numpy(logits[:1], 0.8, 6, 0.7, np.random.default_rng(0))
    assert reference[0] in order[:keep]


def test_greedy_tokens_match_numpy_reference():
    weights = random_weights(TINY)
    prompt = random_prompt(TINY, 2, 8, seed=0)
    want = NumpyEngine(weights, 2, 16, Sampling()).generate(prompt, 8)
    got = TinytonEngine(weights, 2, 16, Sampling(), graph=False).generate(prompt, 8)
    np.testing.assert_array_equal(got, want)


SMALL = config.Config(vocab_size=1000, hidden_size=256, num_hidden_layers=2, num_attention_heads=8,
                      num_key_value_heads=2, intermediate_size=512, max_position_embeddings=64)
"""Large enough for decode-shaped matmuls of several K tiles and programs, small enough for the simulator."""


@pytest.mark.parametrize("backend", ["sim", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("tiles", [*tiles_module.SKINNY_CANDIDATES, *tiles_module.GEMV_CANDIDATES],
                         ids=lambda t: f"{t.block_m}x{t.block_n}x{t.block_k}")
def test_greedy_tokens_on_skinny_tiles(monkeypatch, backend, tiles):
    """Every decode projection on each skinny tile and GEMV form (where it is a candidate): the transposed
    weight tiles of the RoPE regions, the normed operand loaded a K step ahead, grouped heads packed: the
    reference's ids."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(program_module, "matmul_tiles", lambda p: tiles.fit(p) if tiles.fit(p) in
                        tiles_module.candidates(p) else tiles_module.default_tiles(p))
    monkeypatch.setattr(programs_module, "_PROGRAMS", type(programs_module._PROGRAMS)())  # compiled afresh
    weights = random_weights(SMALL, seed=3)
    prompt = random_prompt(SMALL, 1, 4, seed=1)
    want = NumpyEngine(weights, 1, 12, Sampling()).generate(prompt, 6)
    got = TinytonEngine(weights, 1, 12, Sampling(), graph=False).generate(prompt, 6)
    np.testing.assert_array_equal(got, want)


def _decode_program(cfg, batch: int, context: int):
    """The decode program compiled for `cfg`'s shapes (weights and caches as zero-stride views: nothing runs)."""
    c, f, d = cfg.hidden_size, cfg.intermediate_size, cfg.head_dim
    q, kv = cfg.num_attention_heads * d, cfg.num_key_value_heads * d
    per_layer = {"input_layernorm": (c,), "q_proj": (q, c), "k_proj": (kv, c), "v_proj": (kv, c), "o_proj": (c, q),
                 "post_attention_layernorm": (c,), "gate_proj": (f, c), "up_proj": (f, c), "down_proj": (c, f)}
    def zeros(shape, dtype=BF16):
        return np.broadcast_to(np.zeros((), dtype), shape)

    flat = [zeros((cfg.vocab_size, c)), zeros((c,)), zeros((cfg.vocab_size, c))]
    flat += [zeros(per_layer[r]) for _ in range(cfg.num_hidden_layers) for r in weights.LAYER_WEIGHTS]
    caches = [zeros((batch, cfg.num_key_value_heads, context, d)) for _ in range(2 * cfg.num_hidden_layers)]
    table = zeros((context, d), np.float32)
    return model.decode_program.compile(cfg, zeros((batch,), np.int32), zeros((1,), np.int32), table, table, *flat,
                                        *caches)  # fmt: skip


def _layer_kernels(cfg, batch: int, context: int) -> list[str]:
    """The kinds of the kernels one more layer adds to the decode step."""
    one, two = (_decode_program(replace(cfg, num_hidden_layers=n), batch, context) for n in (1, 2))
    kinds = [s.launch.kind for s in two.steps]
    assert len(kinds) - one.num_launches == two.num_launches - one.num_launches
    layer = kinds[len(kinds) - (two.num_launches - one.num_launches) - 1 : -1]  # the second layer, then lm_head
    return layer


LAYER = ["matmul_epilogue", "matmul_epilogue", "attention", "matmul_epilogue", "matmul_epilogue", "matmul_epilogue"]
"""A decode layer: RMSNorm + k/v projections + RoPE + the new cache rows stored in place; RMSNorm + q
projection + RoPE; attention over the caches (bf16, read as stored); o-projection + residual; RMSNorm +
gate/up projections + SwiGLU; down projection + residual."""


def test_decode_layer_is_six_kernels():
    assert _layer_kernels(TINY, 2, 16) == LAYER
    engine = TinytonEngine(random_weights(TINY), 2, 16, Sampling(), graph=False)
    assert engine.launches_per_token == 6 * TINY.num_hidden_layers + 3 + 3  # embedding, RoPE tables, lm_head; the
    # greedy draw's two kernels and the advance
    fused = engine.program.asm["fused"]
    puts = [region for region in fused.split("tta.fusion")[1:] if "tta.put" in region]
    assert len(puts) == TINY.num_hidden_layers and all(region.count("tta.matmul") == 4 for region in puts)


def test_decode_layer_at_llama_3_8b_shapes():
    """Head dim 128, 8 KV heads: the same six kernels; with too few (batch, KV head) programs for the GPU (a
    nominal H100's 132 SMs here) the attention's KV loop is split (flash-decoding), still in one launch."""
    cfg = CONFIGS["llama-3-8b"]
    assert _layer_kernels(cfg, 32, 256) == LAYER
    assert _layer_kernels(cfg, 1, 4096) == LAYER
