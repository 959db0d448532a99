"""FlashAttention-3's producer and consumers (`Blocks.warp_specialize`, tinyton/lowering/fusion/attention.py
`_specialized_loop`): one KV loop whose key and value blocks are descriptor loads, split on sm_90a into a producer
warpgroup copying them by TMA into an mbarrier-guarded ring and consumer warpgroups whose q stays in registers
(wgmma's register A). The same results as the plain kernel on the simulator and the GPU, with and without the
products overlapped, its two consumer warpgroups taking turns (ping-pong) or not, a causal or ragged end masked in
the one loop; forms it does not fit keep the plain loops."""

from __future__ import annotations

import re

import numpy as np
import pytest
from xdsl.dialects import scf
from test_attention import batched_attention, causal_attention, causal_reference, randn, reference
from toolchains import needs_ptxas
from ws_protocol import check

import tinyton as tt
from tinyton.compiler import compile_module
from tinyton.compiler import program as compiler_program
from tinyton.dialects import tt as ttd
from tinyton.lowering.fusion.attention_blocks import Blocks
from tinyton.lowering.tt_to_llvm.pipeline import pipeline_module

BACKENDS = ["sim", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.isolated])]
FORMS = pytest.mark.parametrize(
    "form", [{}, {"overlap": True}, {"pingpong": True}, {"overlap": True, "pingpong": True},
             {"bn": 128, "stages": 2, "overlap": True, "pingpong": True}],
    ids=["plain", "overlapped", "pingpong", "overlapped-pingpong", "128-keys"])
"""The consumers' forms: their products overlapped within a step or not, their warpgroups taking turns or not; 64
keys a step (q in registers) or FlashAttention-3's 128 (q in shared memory)."""


def _specialized(**form) -> Blocks:
    return Blocks(**{"bm": 128, "bn": 64, "num_warps": 8, "warp_specialize": True, **form})


def _kv_loop(program) -> str:
    return str(program.steps[0].launch.module)


@pytest.mark.parametrize("backend", BACKENDS)
@FORMS
@pytest.mark.parametrize("shape, kv_heads", [((2, 4, 256, 64), 4), ((1, 8, 512, 128), 2), ((2, 2, 128, 96), 2)])
def test_warp_specialized_attention_matches(monkeypatch, attention_blocks, backend, form, shape, kv_heads):
    """Heads of their own and grouped-query heads (k and v broadcast over the group), head dims padded or not."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(_specialized(**form))
    b, h, s, d = shape
    rng = np.random.default_rng(s + d)
    q = randn(rng, b, h, s, d, dtype=np.float16)
    k, v = (randn(rng, b, kv_heads, 1, s, d, dtype=np.float16) for _ in range(2))
    q = q.reshape(b, kv_heads, h // kv_heads, s, d)
    program = batched_attention.compile(q, k, v, 0.1)
    assert "tt.warp_specialize" in _kv_loop(program) and "tt.descriptor_load" in _kv_loop(program)
    np.testing.assert_allclose(program(q, k, v, 0.1), reference(q, k, v, 0.1), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@FORMS
@pytest.mark.parametrize("s", [256, 200, 77])
def test_causal_and_ragged_keys_are_masked_in_the_one_loop(monkeypatch, attention_blocks, backend, form, s):
    """A causal end (each program's loop stops at its diagonal) and a ragged last block: the blocks from the first that
    crosses either masked, in a branch of the one loop."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(_specialized(**form))
    rng = np.random.default_rng(s)
    q, k, v = (randn(rng, 2, 3, s, 64, dtype=np.float16) for _ in range(3))
    causal, full = causal_attention.compile(q, k, v), batched_attention.compile(q, k, v, 0.125)
    assert "tt.warp_specialize" in _kv_loop(causal) and "tt.warp_specialize" in _kv_loop(full)
    assert "scf.if" in _kv_loop(causal)  # only the blocks from the diagonal (or S_kv's end) on are masked
    np.testing.assert_allclose(causal(q, k, v), causal_reference(q, k, v, 0.125), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(full(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s", [256, 200])
def test_head_dim_256_in_64_key_blocks(monkeypatch, attention_blocks, backend, s):
    """FlashAttention-3's blocks for head dim 256 (q in shared memory, two stages), causal and full."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(_specialized(bn=64, stages=2, overlap=True, pingpong=True))
    rng = np.random.default_rng(s + 1)
    q, k, v = (randn(rng, 1, 2, s, 256, dtype=np.float16) for _ in range(3))
    causal, full = causal_attention.compile(q, k, v), batched_attention.compile(q, k, v, 0.0625)
    assert "tt.warp_specialize" in _kv_loop(causal) and "tt.warp_specialize" in _kv_loop(full)
    np.testing.assert_allclose(causal(q, k, v), causal_reference(q, k, v, 0.125), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(full(q, k, v, 0.0625), reference(q, k, v, 0.0625), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_queries_that_see_no_key_run_an_empty_loop(monkeypatch, attention_blocks, backend):
    """More queries than keys, bottom-right aligned: the first 70 rows see no key (NaN, as NumPy's softmax), their
    programs' producer and consumers both walk no block (the consumers' turns only opened and closed)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(Blocks(128, 64, 8, warp_specialize=True, overlap=True, pingpong=True))
    rng = np.random.default_rng(9)
    q = randn(rng, 1, 2, 200, 64, dtype=np.float16)
    k, v = (randn(rng, 1, 2, 130, 64, dtype=np.float16) for _ in range(2))
    program = causal_attention.compile(q, k, v)
    assert "tt.warp_specialize" in _kv_loop(program)
    with np.errstate(invalid="ignore"):
        want = causal_reference(q, k, v, 0.125)
    got = program(q, k, v)
    assert np.isnan(got[..., :70, :]).all() and not np.isnan(got[..., 70:, :]).any()
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s, d, bn", [(256, 64, 64), (384, 64, 64), (200, 128, 128), (640, 128, 64)])
def test_persistent_programs_walk_over_the_tiles(monkeypatch, attention_blocks, backend, s, d, bn):
    """`Blocks.persistent` on a GPU of 5 SMs: 5 programs walk over the tiles, causal query blocks in pairs of one
    head (an odd count's last block beside an empty one past the rows), full ones a head's blocks in a row; every
    tile computed once, with q copied to shared memory a tile (128-key blocks) or kept in registers."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    monkeypatch.setattr(compiler_program, "sm_count", lambda: 5)
    attention_blocks(_specialized(bn=bn, stages=2 if bn == 128 else 3, overlap=True, pingpong=True, persistent=True))
    rng = np.random.default_rng(s + d)
    q, k, v = (randn(rng, 2, 3, s, d, dtype=np.float16) for _ in range(3))
    causal, full = causal_attention.compile(q, k, v), batched_attention.compile(q, k, v, 0.125)
    assert causal.steps[0].launch.grid == full.steps[0].launch.grid == (5, 1, 1)
    assert "tt.warp_specialize" in _kv_loop(causal)
    np.testing.assert_allclose(causal(q, k, v), causal_reference(q, k, v, 0.125), rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(full(q, k, v, 0.125), reference(q, k, v, 0.125), rtol=2e-2, atol=2e-2)


@tt.jit
def biased_attention(q, k, v, bias):
    s = q @ k.mT * 0.125 + bias
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("s, d", [(200, 64), (256, 128)])
def test_a_bias_block_rides_in_the_ring(monkeypatch, attention_blocks, backend, s, d):
    """An S x S bias array's `[BM, BN]` blocks are descriptor loads beside the key and value blocks (the producer
    copies them into the same slots; a ragged last block reads 0 past the keys and is masked)."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(_specialized(overlap=True, pingpong=True))
    rng = np.random.default_rng(s + d)
    q, k, v = (randn(rng, 2, 3, s, d, dtype=np.float16) for _ in range(3))
    bias = randn(rng, s, s, dtype=np.float16)
    program = biased_attention.compile(q, k, v, bias)
    assert _kv_loop(program).count("tt.descriptor_load") == 4  # k, v and the bias a step; the last value block
    want = reference(q, k, v, 0.125, bias.astype(np.float64), True)
    np.testing.assert_allclose(program(q, k, v, bias), want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("backend", BACKENDS)
@FORMS
@pytest.mark.parametrize("scale", [0.125, -0.125])
def test_a_runtime_scale_of_either_sign(monkeypatch, attention_blocks, backend, form, scale):
    """A 0-d array scale: each block's softmax is emitted for either sign (maxima or minima of the unscaled scores)
    and a branch a block picks one; the loop's carried values read only inside the branch stay carried."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(_specialized(**form))
    rng = np.random.default_rng(7)
    q, k, v = (randn(rng, 2, 3, 200, 64, dtype=np.float16) for _ in range(3))
    runtime = np.array(scale, np.float16)
    program = batched_attention.compile(q, k, v, runtime)
    assert "tt.warp_specialize" in _kv_loop(program) and "scf.if" in _kv_loop(program)
    np.testing.assert_allclose(program(q, k, v, runtime), reference(q, k, v, scale), rtol=2e-2, atol=2e-2)


@needs_ptxas
def test_a_runtime_scale_takes_a_whole_softmax_for_each_sign(attention_blocks):
    """sm_90a, the persistent ping-pong form of 128-key blocks: a 0-d array scale's kernel lowers (the loop's values
    read only in the branch stay carried) with nothing spilled; each branch holds a whole softmax, so that ptxas
    reduces one row under the other's exp2 as for a constant scale: the exp2s twice over, the maxima's reductions in
    one branch and the minima's in the other, the products as many."""
    attention_blocks(Blocks(128, 128, 8, stages=2, warp_specialize=True, pingpong=True, persistent=True))
    q = np.zeros((2, 4, 1024, 128), np.float16)
    kernels = []
    for scale in (0.1, np.array(0.1, np.float16)):
        launch = batched_attention.compile(q, q, q, scale).steps[0].launch
        kernels.append(compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite"))
    constant, runtime = kernels
    assert runtime.n_spills == constant.n_spills == 0
    count = lambda kernel, instruction: kernel.asm["ptx"].count(instruction)
    assert count(runtime, "ex2.approx") == 2 * count(constant, "ex2.approx")
    assert count(runtime, "min.NaN.f32") > 0 and count(constant, "min.NaN.f32") == 0
    assert count(runtime, "wgmma.mma_async") == count(constant, "wgmma.mma_async")


@tt.jit
def transposed_values(q, k, vt):
    s = q @ k.mT * 0.125
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ vt.mT


@pytest.mark.parametrize("backend", BACKENDS)
@FORMS
def test_values_stored_transposed_ride_in_the_ring(monkeypatch, attention_blocks, backend, form):
    """v given as `vᵀ.mT` (keys contiguous): the producer copies vᵀ's `[D, BN]` boxes, transposed for the dot as k's
    rows are; a ragged last block reads 0 past the keys."""
    monkeypatch.setenv("TINYTON_BACKEND", backend)
    attention_blocks(_specialized(**form))
    rng = np.random.default_rng(13)
    q, k, v = (randn(rng, 2, 3, 200, 64, dtype=np.float16) for _ in range(3))
    vt = np.ascontiguousarray(v.swapaxes(-1, -2))
    program = transposed_values.compile(q, k, vt)
    assert "tt.warp_specialize" in _kv_loop(program)
    np.testing.assert_allclose(program(q, k, vt), reference(q, k, v, 0.125), rtol=2e-2, atol=2e-2)


def test_forms_it_does_not_fit_keep_the_plain_loops(attention_blocks):
    """A split KV loop (decoding) and a k read transposed keep the plain kernel: the request is ignored, as Triton's
    is."""
    attention_blocks(Blocks(16, 32, 4, splits=4, warp_specialize=True))
    rng = np.random.default_rng(1)
    q = randn(rng, 2, 1, 64, dtype=np.float16)
    k, v = (randn(rng, 2, 300, 64, dtype=np.float16) for _ in range(2))
    assert "tt.warp_specialize" not in _kv_loop(batched_attention.compile(q, k, v, 0.1))
    attention_blocks(Blocks(64, 32, 4, warp_specialize=True))
    kt = np.ascontiguousarray(np.swapaxes(k, -1, -2))
    assert "tt.warp_specialize" not in _kv_loop(transposed_keys.compile(q, kt, v))


@tt.jit
def transposed_keys(q, kt, v):
    """k given as kᵀ, stored `[D, S_kv]`: its blocks are not rows TMA copies as the loop reads them."""
    s = (q @ kt) * 0.1
    e = tt.exp(s - tt.max(s, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)) @ v


@needs_ptxas
@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlapped"])
def test_the_consumers_wait_on_mbarriers_only(attention_blocks, overlap):
    """sm_90a: a producer warpgroup (its registers given up) issues the TMA copies, the consumers (grown to 240
    registers) read q from registers and wait for each slot on its mbarrier: no barrier of all threads in their
    loop, nothing spilled."""
    attention_blocks(Blocks(128, 64, 8, warp_specialize=True, overlap=overlap))
    rng = np.random.default_rng(2)
    q, k, v = (randn(rng, 2, 4, 1024, 128, dtype=np.float16) for _ in range(3))
    launch = batched_attention.compile(q, k, v, 0.1).steps[0].launch
    kernel = compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite")
    ptx = kernel.asm["ptx"]
    assert "setmaxnreg.dec.sync.aligned.u32 24" in ptx and "setmaxnreg.inc.sync.aligned.u32 240" in ptx
    assert "cp.async.bulk.tensor.4d" in ptx and kernel.n_spills == 0
    consumers = ptx[ptx.index("setmaxnreg.inc"):]
    loop = consumers[: consumers.index("mbarrier.arrive")]
    assert "bar.sync" not in loop and "mbarrier.try_wait" in loop
    assert re.search(r"wgmma.mma_async\S* \{[^}]*\}, \{%r\d+, %r\d+, %r\d+, %r\d+\}", loop), "q from registers"
    assert ("wgmma.wait_group.sync.aligned 1" in loop) == overlap


@needs_ptxas
@pytest.mark.parametrize("overlap", [False, True], ids=["plain", "overlapped"])
def test_pingpong_consumers_take_turns_issuing_their_products(attention_blocks, overlap):
    """sm_90a, `Blocks.pingpong`: in the consumers' loop each warpgroup waits for its turn (named barrier 2 or 3)
    before the step's products and passes it on right after issuing them, before waiting for any (overlapped: both
    products issued in the turn); nothing spilled."""
    attention_blocks(Blocks(128, 64, 8, warp_specialize=True, overlap=overlap, pingpong=True))
    q = np.zeros((2, 4, 1024, 128), np.float16)
    launch = batched_attention.compile(q, q, q, 0.1).steps[0].launch
    kernel = compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite")
    ptx = kernel.asm["ptx"]
    assert kernel.n_spills == 0
    consumers = ptx[ptx.index("setmaxnreg.inc"):]
    turn = consumers[consumers.index("@p bar.sync 3, 256"): consumers.index("@p bar.arrive 3, 256")]
    assert turn.count("wgmma.commit_group") == (2 if overlap else 1)
    assert "wgmma.wait_group.sync.aligned 1" not in turn


@needs_ptxas
@pytest.mark.parametrize("d, bn", [(128, 128), (256, 64)])
def test_wide_blocks_read_q_from_shared_memory(attention_blocks, d, bn):
    """sm_90a, FlashAttention-3's 128-key blocks at D = 128 and 64-key ones at D = 256: q copied to shared memory once
    before the split (the scores' product reads both operands there), by the program's 8 warps only: each copy
    predicated, where the producer's 4 warps, whose index wraps onto the copy's layout, had written the first 4
    warps' bytes again (racecheck's write-write hazards). Two stages fit beside it, nothing spilled (q in registers
    spilled 80 bytes at D = 128, and would take 64 registers a thread at D = 256)."""
    attention_blocks(Blocks(128, bn, 8, stages=2, warp_specialize=True, overlap=True, pingpong=True))
    q = np.zeros((1, 2, 1024, d), np.float16)
    launch = causal_attention.compile(q, q, q).steps[0].launch
    kernel = compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite")
    ptx = kernel.asm["ptx"]
    assert kernel.n_spills == 0
    split = ptx.index("setmaxnreg.dec")
    assert "cp.async.cg.shared.global" in ptx[:split] and re.search(r"cp.async.wait_group\s+0;", ptx[:split])
    copies = re.findall(r"^\s*(\S+)\s+cp.async.cg.shared.global", ptx[:split], re.M)
    assert copies and all(guard.startswith("@%p") for guard in copies), copies
    assert re.search(r"setp.lt.u32\s+%p\d+, %r\d+, 256;", ptx[:split]), "the program's warps: thread below 256"
    consumers = ptx[ptx.index("setmaxnreg.inc"):]
    assert re.search(rf"wgmma.mma_async\S*m64n{bn}k16\S* \{{[^}}]*\}}, da, db", consumers), "q from shared memory"


@needs_ptxas
@pytest.mark.parametrize("bn, tile_loads", [(128, 1), (64, 2)])
def test_the_persistent_producer_copies_each_tiles_q_ahead(attention_blocks, bn, tile_loads):
    """sm_90a, `Blocks.persistent` (D = 128): the producer's tile loop copies each tile's q and, where it fits in shared
    memory beside the ring (64-key blocks), the value block of the last overlapped product into two slots of their own
    a tile ahead, then the key and value blocks of its steps; the consumers copy nothing (where that value block does
    not fit, they load it after the K loop) and wait for the tile's slot, then each step's; the mbarrier protocol
    and the ping-pong turns, run on across the tiles, hold (ws_protocol.py) and nothing spilled."""
    attention_blocks(Blocks(128, bn, 8, stages=2 if bn == 128 else 3, warp_specialize=True, overlap=True,
                            pingpong=True, persistent=True))
    q = np.zeros((4, 16, 1024, 128), np.float16)
    launch = causal_attention.compile(q, q, q).steps[0].launch
    assert launch.grid == (132, 1, 1)
    module = launch.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=launch.num_warps, arch="sm_90a")
    split = next(op for op in module.walk() if isinstance(op, ttd.WarpSpecializeOp))
    tile_loop = next(op for op in split.producer.block.ops if isinstance(op, scf.ForOp))
    copies = [op for op in tile_loop.body.block.ops if isinstance(op, ttd.TmaCopyOp)]
    assert len(copies) == tile_loads and copies[0].base.name_hint == "q"
    assert not any(isinstance(op, ttd.AsyncCopyOp) for op in split.consumer.walk())
    left = [op for op in split.consumer.walk() if isinstance(op, ttd.DescriptorLoadOp)]  # v where it did not fit
    k_loop = next(op for op in left[0].parent_block().ops if isinstance(op, scf.ForOp)) if left else None
    assert len(left) == 2 - tile_loads and all(k_loop.is_before_in_block(op) for op in left)
    for program in (0, 131):
        copied, read = check(module, program)
        assert copied == read > 0
    kernel = compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite")
    assert kernel.n_spills == 0


@pytest.mark.parametrize("d, bn", [(64, 64), (128, 128), (256, 64)])
def test_the_producer_copies_the_last_value_block_first(attention_blocks, d, bn):
    """The overlapped loop's last `p @ v` reads the value block of its last step after the loop: the producer copies
    it into a slot of its own before the ring's blocks (the consumers waited a memory latency for it at the end of
    each program); where no producer runs (sm_80), the load stays after the loop, not held across it."""
    attention_blocks(_specialized(bn=bn, stages=2 if d > 64 else 3, overlap=True, pingpong=True))
    q = np.zeros((2, 3, 384, d), np.float16)
    launch = causal_attention.compile(q, q, q).steps[0].launch
    module = launch.module.clone()
    pipeline_module(module, 227 * 1024, num_warps=launch.num_warps, arch="sm_90a")
    split = next(op for op in module.walk() if isinstance(op, ttd.WarpSpecializeOp))
    (first,) = [op for op in split.producer.block.ops if isinstance(op, ttd.TmaCopyOp)]
    assert first.base.name_hint == "v" and not any(isinstance(op, ttd.DescriptorLoadOp) for op in split.consumer.walk())
    for program in range(3):
        copied, read = check(module, program)
        assert copied == read > 0
    module = launch.module.clone()
    pipeline_module(module, 163 * 1024, num_warps=launch.num_warps, arch="sm_80")
    (load,) = [op for op in module.walk() if isinstance(op, ttd.DescriptorLoadOp) and op.parent_op() is not None
               and not isinstance(op.parent_op(), scf.ForOp)]
    assert not any(isinstance(op, scf.ForOp) and load.is_before_in_block(op) for op in load.parent_block().ops)


@needs_ptxas
def test_the_producer_copies_the_bias_blocks(attention_blocks):
    """sm_90a: a bias block is one more TMA copy a step in the producer's loop (its slots sized for it, nothing
    spilled); the consumers read it from its slot, not from global memory (34 global loads a thread when they
    loaded it themselves)."""
    attention_blocks(_specialized(overlap=True, pingpong=True))
    q = np.zeros((2, 3, 200, 64), np.float16)
    launch = biased_attention.compile(q, q, q, np.zeros((200, 200), np.float16)).steps[0].launch
    kernel = compile_module(launch.module, num_warps=launch.num_warps, arch="sm_90a", toolchain="llvmlite")
    ptx = kernel.asm["ptx"]
    assert kernel.n_spills == 0
    producer = ptx[ptx.index("setmaxnreg.dec"): ptx.index("setmaxnreg.inc")]
    consumers = ptx[ptx.index("setmaxnreg.inc"):]
    # the last product's value block once, then k, v and the bias at each copy site
    assert (producer.count("cp.async.bulk.tensor") - 1) % 3 == 0 and consumers.count("ld.global") <= 4
