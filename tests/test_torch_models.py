"""torch.compile(backend=tinyton) on whole models: forward and backward match eager (fp32, 1e-4) on the simulator
(CPU tensors), with the ATen ops that ran in torch checked: none, except the ops whose `tt.` builtin array
programs do not have yet (`expected_fallbacks`), which disappear when the builtin lands."""

from __future__ import annotations

import copy
import sys

import pytest

torch = pytest.importorskip("torch", reason="the torch backend's tests need torch (pip install torch)")

import tinyton.torch as ttt
from torch_checks import TOL, check_forward_backward, check_training, expected_fallbacks, kernel_kinds
from torch_models import (
    AlibiAttention, BertLayer, GPTBlock, LayerNorm, LlamaBlock, MicroGPT, NanoGPT, RelativeAttention, TopKMoE,
    rope_tables,
)


def test_llama_block_forward_backward() -> None:
    torch.manual_seed(0)
    cos, sin = rope_tables(8, 8)
    e = check_forward_backward(LlamaBlock(), torch.randn(2, 8, 32, requires_grad=True), cos, sin)
    assert {g.graph for g in e.report.groups} == {"forward", "backward"}
    # what the forward saves for the backward as views (weights' transposes, reshaped activations) torch makes
    # from the inputs and results: no kernel copies them (32 launches when they did)
    assert e.num_launches <= 19, str(e)


@pytest.mark.parametrize("gqa,launches,backward", [("enable_gqa", 10, 24), ("repeat", 13, 26)])
def test_llama_block_training_attention_is_flash_both_ways(gqa: str, launches: int, backward: int) -> None:
    """Heads of 16: the attention's scores are recomputed in the backward, not saved (q, k, v, the output and the
    rows' logsumexp are), so the forward is one flash-attention kernel (19 and 21 forward launches when the
    probabilities were saved) that stores the output both as kept and with its heads merged for the output
    projection, and the backward FlashAttention-2's delta, dk/dv and dq kernels, with no second pass over the keys
    for the forward's statistics; k and v repeated by hand are saved repeated. The residual adds after the output
    and down projections run in their epilogues, on the products' rows before the reshape to `[B, T, C]` (12 and 17
    forward launches when the reshape kept them apart). The backward's RoPE is one
    elementwise kernel a tensor that stores the heads merged for the projections' gradients, and each norm weight's
    gradient one reduction, dk and dv summed over repeated copies stored with the heads merged (30 and 33 backward
    launches when RoPE's was four kernels and two transposes, each norm weight's two reductions, and the sums
    copied by transposes)."""
    torch.manual_seed(0)
    cos, sin = rope_tables(8, 16)
    e = check_forward_backward(LlamaBlock(dim=64, hidden=128, gqa=gqa), torch.randn(2, 8, 64, requires_grad=True),
                               cos, sin)
    kinds = {g.graph: [step.launch.kind for step in g.last.steps] for g in e.report.groups}
    assert kinds["forward"].count("attention") == 1 and e.num_launches <= launches, str(e)
    assert "attention" not in kinds["backward"] and {"attention_dkdv", "attention_dq"} <= set(kinds["backward"]), str(e)
    assert len(kinds["backward"]) <= backward and "transpose" not in kinds["backward"], str(e)


@pytest.mark.parametrize("gqa", ["repeat", "enable_gqa"])
def test_qwen_block_with_qkv_bias(gqa: str) -> None:
    torch.manual_seed(1)
    cos, sin = rope_tables(8, 8)
    check_forward_backward(LlamaBlock(qkv_bias=True, gqa=gqa), torch.randn(1, 8, 32, requires_grad=True), cos, sin)


def test_nanogpt_block_forward_backward() -> None:
    torch.manual_seed(0)
    check_forward_backward(GPTBlock().eval(), torch.randn(2, 8, 32, requires_grad=True))


@pytest.mark.parametrize("heads", [4, 8])
def test_nanogpt_block_training_attention_is_flash_both_ways(heads: int) -> None:
    """nanoGPT's attention written out (`masked_fill`, `softmax`, `@ v`) is recomputed in the backward like an SDPA
    call: the forward saves the qkv projection, reads q, k and v in it and stores the heads merged (one attention
    kernel, 9 launches; 18 when the probabilities were saved), the backward is FlashAttention-2's kernels, which read
    q, k, v and do where they are and store dq, dk and dv side by side where the projection's gradient reads them (26
    backward launches; 35 when kernels copied each operand first and each gradient after). Heads of 8 (narrower
    than a tensor-core tile) keep the probabilities."""
    torch.manual_seed(0)
    e = check_forward_backward(GPTBlock(dim=64, heads=heads, dropout=0.0), torch.randn(2, 8, 64, requires_grad=True))
    kinds = {g.graph: [step.launch.kind for step in g.last.steps] for g in e.report.groups}
    if heads == 4:
        assert kinds["forward"].count("attention") == 1 and len(kinds["forward"]) <= 9, str(e)
        assert {"attention_dkdv", "attention_dq"} <= set(kinds["backward"]), str(e)
        assert "slice" not in kinds["backward"] and len(kinds["backward"]) <= 26, str(e)
    else:
        assert "attention" not in kinds["forward"] and "attention_dq" not in kinds["backward"], str(e)


def test_nanogpt_sdpa_block_training_forward_copies_nothing() -> None:
    """nanoGPT's flash path (`F.scaled_dot_product_attention` on the windows of the qkv projection): the forward saves
    the projection, of which q, k and v are views (a copy of the projection and of each when the views were outside
    the attention's region), the GELU and both residual adds run in the products' epilogues on their rows before the
    reshape to `[B, T, C]` (the activation and the last residual were kernels of their own, 13 launches in all): the
    norms, the two projections around the attention, the attention, and the MLP's two."""
    torch.manual_seed(0)
    block = GPTBlock(dim=64, heads=4, dropout=0.0, sdpa=True)
    e = check_forward_backward(block, torch.randn(2, 8, 64, requires_grad=True))
    kinds = {g.graph: [step.launch.kind for step in g.last.steps] for g in e.report.groups}
    assert kinds["forward"] == ["row_reduction", "matmul_epilogue", "attention", "matmul_epilogue", "row_reduction",
                                "matmul_epilogue", "matmul_epilogue"], str(e)
    assert {"attention_dkdv", "attention_dq"} <= set(kinds["backward"]) and len(kinds["backward"]) <= 20, str(e)


def test_nanogpt_block_with_dropout_saves_its_probabilities() -> None:
    """Dropout after the softmax draws random numbers a recomputation would draw again: the default partition."""
    torch.manual_seed(0)
    e = ttt.explain(GPTBlock(dim=64, heads=4, dropout=0.5), torch.randn(2, 8, 64, requires_grad=True))
    e.output.sum().backward()
    kinds = {g.graph: [step.launch.kind for step in g.last.steps] for g in e.report.groups}
    assert "attention" not in kinds["forward"] and "attention_dq" not in kinds["backward"], str(e)


def test_nanogpt_block_reads_q_k_and_v_in_place() -> None:
    """Inference: the windows of the qkv projection that `split` and `view(...).transpose(1, 2)` make are read by
    the attention kernel through their strides; no kernel copies or transposes them (13 launches when they did)."""
    torch.manual_seed(0)
    with torch.no_grad():
        e = ttt.explain(GPTBlock().eval(), torch.randn(2, 8, 32))
    kinds = kernel_kinds(e)
    attention = kinds.index("attention")
    assert kinds[attention - 1] == "matmul_epilogue" and e.num_launches <= 10, str(e)


def test_gpt_block_with_erf_gelu_and_handwritten_layernorm() -> None:
    torch.manual_seed(2)
    check_forward_backward(GPTBlock(gelu="none", norm=LayerNorm).eval(), torch.randn(2, 8, 32, requires_grad=True),
                           fallbacks=expected_fallbacks(("erf", "aten.gelu.default"), ("erf", "aten.erf.default")))


class _Layers(torch.nn.Module):
    """The activations, norms and shape ops of vision and convolution-free models beside the LLMs: ELU (and SELU,
    CELU), leaky ReLU, hardtanh (ReLU6), atan2, vector norms (`F.normalize`, `Tensor.norm`), cumprod, group norm,
    batch norm in eval, flips, constant pads (a negative one crops) and `index_select`."""

    def __init__(self) -> None:
        super().__init__()
        self.gn, self.bn = torch.nn.GroupNorm(2, 8), torch.nn.BatchNorm1d(8).eval()
        self.bn.running_mean.normal_()
        self.bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        F = torch.nn.functional
        a = F.elu(x) + F.selu(x) + F.celu(x, 0.5) + F.leaky_relu(x, 0.2) + F.relu6(x * 4) + F.hardtanh(x, -0.5, 0.5)
        b = torch.atan2(x, x.flip(-1) + 0.1) + F.normalize(x, dim=-1) + (x * 0.1 + 1).cumprod(-1)
        c = self.gn(x) + self.bn(x) + x.norm(p=1, dim=1, keepdim=True) + x.norm()
        d = F.pad(x, (1, -2)).sum(-1, keepdim=True) + x.index_select(2, torch.tensor([0, 3, 3]))[..., :1]
        return a + b + c + d


def test_t5_relative_position_bias() -> None:
    """T5's attention: the buckets of the query-key distances (arange cast, reshaped to a column, logs and clamps),
    the bias table gathered and permuted to `[H, T, T]`: one kernel beside the flash attention (7 when each
    column index and the permute were kernels of their own), and the bias table's gradient through the gather."""
    torch.manual_seed(4)
    model = RelativeAttention()
    x = torch.randn(2, 12, 32, requires_grad=True)
    check_forward_backward(model, x)
    with torch.no_grad():
        e = ttt.explain(model, x.detach())
    assert kernel_kinds(e).count("attention") == 1 and e.num_launches <= 4, str(e)


def test_alibi_attention() -> None:
    """ALiBi's `slope * (j - i)` bias (torch's rules compute the product in float64 and round once): computed in the
    attention kernel from each block's indices and the four slopes (tinyton/analysis/index_bias.py), not read as
    H x S x S values; forward and backward match eager."""
    torch.manual_seed(5)
    q, k, v = (torch.randn(2, 4, 40, 16, requires_grad=True) for _ in range(3))
    check_forward_backward(AlibiAttention(), q, k, v)
    with torch.no_grad():
        e = ttt.explain(AlibiAttention(), q.detach(), k.detach(), v.detach())
    assert kernel_kinds(e) == ["attention"], str(e)


def test_bert_layer_with_a_padding_mask() -> None:
    """BERT's padding mask, `(1 - mask) * finfo.min` added to the scores, is read whole by the attention (a rule that
    dropped terms constant along the keys had dropped its `finfo.min`: the keys not masked scored `finfo.max` and the
    softmax was NaN; before that the rule failed with a TypeError on the mask, and the layer ran in torch)."""
    torch.manual_seed(7)
    model, x, mask = BertLayer(), torch.randn(2, 8, 32), torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    check_forward_backward(model, x.clone().requires_grad_(), mask)
    with torch.no_grad():
        e = ttt.explain(model, x, mask)
        torch.testing.assert_close(e.output, model(x, mask), **TOL)
    assert not e.fallbacks and kernel_kinds(e).count("attention") == 1, str(e)


def test_moe_router_checks_its_experts_in_one_kernel() -> None:
    """A top-k router's `one_hot` checks its indices (`any` of those below 0, `any` of those past the experts): both
    checks read the top-k window of the router's argsort in place, in one kernel (13 launches when a kernel copied the
    window once per check and each check was a kernel of its own). Its training step runs in tinyton too: top-k's
    gradient is a scatter of k elements a row."""
    torch.manual_seed(6)
    model, x = TopKMoE(), torch.randn(8, 16)
    with torch.no_grad():
        e = ttt.explain(model, x)
        torch.testing.assert_close(e.output, model(x), **TOL)
    assert not e.fallbacks and e.num_launches <= 11, str(e)
    check_forward_backward(model, x.requires_grad_())


def test_activations_norms_and_shape_ops_beyond_the_llms() -> None:
    torch.manual_seed(3)
    check_forward_backward(_Layers(), torch.randn(3, 8, 6, requires_grad=True))


def test_a_convolutional_network_trains_in_tinyton() -> None:
    """Convolutions forward and backward (`convolution_backward` too), an upsampling transposed convolution among
    them: the gradients as eager's, no ATen op in torch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(4, 8, 3, padding=1), torch.nn.GELU(), torch.nn.Conv1d(8, 8, 3, stride=2),
                                torch.nn.ReLU(), torch.nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1))
    check_forward_backward(model, torch.randn(2, 4, 10, requires_grad=True))


def test_batch_norm_trains_on_the_batch_statistics() -> None:
    """Batch norm in a training step (AOTAutograd's functional form): each channel standardised by its batch mean
    and biased variance over the batch and positions, and the running statistics moved towards them (the variance
    unbiased) as eager moves them, two steps in a row; the gradients as eager's, no ATen op in torch."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8, momentum=0.3),
                                torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1), torch.nn.BatchNorm2d(4))
    reference = copy.deepcopy(model)
    compiled = torch.compile(model, backend=ttt.backend)
    # as `explain` does: past dynamo's recompile limit on `Sequential.forward`, hit by the tests before, dynamo would
    # skip the module call's code for good, and every later test's module with it
    with torch._dynamo.config.patch(recompile_limit=sys.maxsize, accumulated_recompile_limit=sys.maxsize):
        for step in range(2):
            x = torch.randn(2, 3, 5, 5)
            out, want = compiled(x), reference(x)  # each call moves the running statistics once
            torch.testing.assert_close(out, want, **TOL)
            out.square().sum().backward()
            want.square().sum().backward()
            for (name, p), q in zip(model.named_parameters(), reference.parameters()):
                torch.testing.assert_close(p.grad, q.grad, **TOL, msg=lambda m, name=name: f"step {step}, {name}: {m}")
    for (name, b), r in zip(model.named_buffers(), reference.buffers()):
        torch.testing.assert_close(b, r, **TOL, msg=lambda m, name=name: f"{name}: {m}")
    e = ttt.explain(copy.deepcopy(model), torch.randn(2, 3, 5, 5))
    assert not e.fallbacks, e.reasons


@pytest.mark.parametrize("make,shape,dim", [
    (lambda: torch.nn.Linear(8, 4), (3, 8), 0),
    (lambda: torch.nn.Linear(8, 4), (3, 8), None),
    (lambda: torch.nn.Conv1d(8, 8, 5, padding=2, groups=2), (2, 8, 12), 2),
    (lambda: torch.nn.ConvTranspose1d(8, 4, 4, stride=2, padding=1), (2, 8, 6), 0),
], ids=["linear", "linear-whole-weight", "conv1d-kernel-dim", "transposed-conv1d"])
def test_weight_norm_trains_in_tinyton(make, shape: tuple[int, ...], dim: int | None) -> None:
    """Weight norm (`parametrizations.weight_norm`: wav2vec2's positional convolution normalises over its kernel dim,
    HiFi-GAN's and EnCodec's convolutions over their first dim, or over the whole weight): forward and backward as
    eager's (`_weight_norm_interface_backward` ran in torch)."""
    torch.manual_seed(0)
    module = torch.nn.utils.parametrizations.weight_norm(make(), dim=dim)
    check_forward_backward(module, torch.randn(*shape, requires_grad=True))


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.InstanceNorm2d(3, affine=True), (2, 3, 5, 5)), (lambda: torch.nn.InstanceNorm1d(4), (2, 4, 7)),
    (lambda: torch.nn.InstanceNorm3d(3), (3, 4, 5, 2)),
    (lambda: torch.nn.BatchNorm2d(3, track_running_stats=False), (2, 3, 4, 5)),
], ids=["instance-2d-affine", "instance-1d", "instance-3d-unbatched", "batch-no-running-stats"])
def test_norms_on_the_batchs_statistics_without_running_ones(make, shape: tuple[int, ...]) -> None:
    """Instance norm (torch's batch norm of `[1, N * C, ...]`) and batch norm without running statistics: AOTAutograd's
    `_native_batch_norm_legit.no_stats`, each channel standardised over the batch, forward and backward as eager's
    (it ran in torch)."""
    torch.manual_seed(0)
    check_forward_backward(make(), torch.randn(*shape, requires_grad=True))


@pytest.mark.parametrize("pool,shape", [
    ({"kernel_size": 2}, (2, 3, 9, 8)), ({"kernel_size": 3, "stride": 2, "padding": 1}, (2, 3, 9, 8)),
    ({"kernel_size": (2, 3), "stride": (1, 2), "dilation": (2, 1)}, (2, 3, 9, 8)),
    ({"kernel_size": 3, "stride": 1, "padding": 1}, (2, 3, 9, 8)),
    ({"kernel_size": 3, "stride": 2, "ceil_mode": True}, (2, 3, 9, 8)),
    ({"kernel_size": 3, "stride": 2, "padding": 1, "dilation": 2, "ceil_mode": True}, (2, 3, 9, 8)),
    ({"kernel_size": 2}, (3, 9, 8)),
], ids=["2x2", "3x3-stride-2-padded", "dilated", "overlapping", "ceil", "ceil-padded-dilated", "unbatched"])
def test_max_pooling_forward_and_backward(pool: dict, shape: tuple[int, ...]) -> None:
    """Max pooling with indices as torch's (the first maximum of a window in scan order, a NaN the maximum, the padding
    and what a last window of `ceil_mode` runs past never chosen; an unbatched input too), and its gradient: each
    window's added where its maximum is, overlapping windows' summed (`ceil_mode` and unbatched inputs ran in torch)."""
    torch.manual_seed(0)
    x = torch.randn(*shape)
    x[..., 2, :2, :2] = 5.0  # ties
    check_forward_backward(torch.nn.MaxPool2d(**pool), x.clone().requires_grad_())
    x[..., 0, 1, 1] = float("nan")
    pooled = ttt.explain(lambda x: torch.nn.functional.max_pool2d_with_indices(x, **pool), x)
    values, indices = torch.nn.functional.max_pool2d_with_indices(x, **pool)
    torch.testing.assert_close(pooled.output[0], values, equal_nan=True)
    assert torch.equal(pooled.output[1], indices) and not pooled.fallbacks, pooled.reasons


@pytest.mark.parametrize("make,shape", [
    (lambda: torch.nn.AdaptiveMaxPool2d(1), (2, 3, 20, 24)),
    (lambda: torch.nn.AdaptiveMaxPool2d((2, 3)), (2, 3, 8, 9)),
    (lambda: torch.nn.AdaptiveMaxPool3d((1, 2, 1)), (2, 3, 4, 4, 6)),
    (lambda: torch.nn.AdaptiveMaxPool2d(2), (3, 8, 8)),
    (lambda: torch.nn.MaxPool2d(10), (2, 3, 20, 31)),
], ids=["global", "2x3", "3d", "unbatched", "10x10-tiles"])
def test_max_pooling_by_tiles_of_any_size(make, shape: tuple[int, ...]) -> None:
    """Adaptive max pooling into bins that divide the input (global max pooling among them) is max pooling by tiles,
    and tiles of any size are a reshape (a global pooling's 480 positions, past the 64 gathered as slices), their
    gradient the tiles of shares laid back in place: values and gradients as eager's (adaptive max pooling and pooling
    windows of more than 64 positions ran in torch)."""
    torch.manual_seed(0)
    check_forward_backward(make(), torch.randn(*shape, requires_grad=True))


def test_adaptive_max_pooling_indices() -> None:
    """Adaptive max pooling's indices as eager's: the first maximum of a bin in scan order (ties), a NaN the maximum."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 9)
    x[0, 0, 1:3, 1:3], x[1, 1, 0, 0] = 5.0, float("nan")
    pooled = ttt.explain(lambda x: torch.nn.functional.adaptive_max_pool2d(x, (2, 3), return_indices=True), x)
    values, indices = torch.nn.functional.adaptive_max_pool2d(x, (2, 3), return_indices=True)
    torch.testing.assert_close(pooled.output[0], values, equal_nan=True)
    assert torch.equal(pooled.output[1], indices) and not pooled.fallbacks, pooled.reasons


AVERAGE_POOLS = {
    "2x2": (lambda: torch.nn.AvgPool2d(2), (2, 3, 8, 9)),
    "3x3-stride-2-padded-uncounted": (lambda: torch.nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 9, 10)),
    "ceil-uncounted": (lambda: torch.nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False), (2, 3, 7, 9)),
    "ceil-padded": (lambda: torch.nn.AvgPool2d((3, 2), (2, 3), (1, 0), ceil_mode=True), (2, 3, 8, 10)),
    "divisor": (lambda: torch.nn.AvgPool2d(3, 1, 1, divisor_override=5), (2, 3, 6, 6)),
    "unbatched": (lambda: torch.nn.AvgPool2d(2), (3, 8, 8)),
    "1d": (lambda: torch.nn.AvgPool1d(3, 2, 1), (2, 3, 11)),
    "3d": (lambda: torch.nn.AvgPool3d(2), (2, 3, 4, 4, 6)),
    "adaptive-uneven": (lambda: torch.nn.AdaptiveAvgPool2d((2, 3)), (2, 3, 7, 8)),
    "adaptive-6-of-13": (lambda: torch.nn.AdaptiveAvgPool2d(6), (2, 4, 13, 13)),
    "adaptive-up": (lambda: torch.nn.AdaptiveAvgPool2d(5), (2, 3, 3, 4)),
    "adaptive-1d": (lambda: torch.nn.AdaptiveAvgPool1d(4), (2, 3, 10)),
    "adaptive-3d": (lambda: torch.nn.AdaptiveAvgPool3d((2, 3, 2)), (2, 3, 5, 7, 4)),
}


@pytest.mark.parametrize("name", AVERAGE_POOLS)
def test_average_pooling_forward_and_backward(name: str) -> None:
    """Average pooling as torch's (the padding counted or not, `ceil_mode`'s last window clipped, `divisor_override`)
    and adaptive average pooling (bins of uneven and overlapping sizes), 1-d to 3-d, and their gradients: one
    reduction for an average pooling, one a dim for an adaptive one (and a kernel storing the bins' weights where two
    dims share them); no ATen op in torch (each ran in torch whole)."""
    torch.manual_seed(0)
    make, shape = AVERAGE_POOLS[name]
    e = check_forward_backward(make(), torch.randn(*shape, requires_grad=True))
    assert e.num_launches <= (len(shape) - 1 if name.startswith("adaptive") else 1), str(e)


def test_a_convolutional_classifier_with_batch_norm_and_pooling_trains_in_tinyton() -> None:
    """Convolutions, batch norm on the batch's statistics, ReLU and SiLU, max and global average pooling and a
    log-softmax head: forward and backward as eager's, no ATen op in torch; with the batch size dynamic too (as dynamo
    makes it once a model sees a second one), where the backward's batch norm scales by a float of the sizes."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1, stride=2), torch.nn.SiLU(), torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(), torch.nn.Linear(16, 10), torch.nn.LogSoftmax(-1))
    check_forward_backward(model, torch.randn(4, 3, 12, 12, requires_grad=True))
    model.zero_grad(set_to_none=True)
    x = torch.randn(3, 3, 12, 12, requires_grad=True)
    torch._dynamo.mark_dynamic(x, 0)
    check_forward_backward(model, x)


@pytest.mark.parametrize("model_class", [NanoGPT, MicroGPT])
def test_small_lm_training_steps_match_eager(model_class: type) -> None:
    torch.manual_seed(0)
    check_training(model_class(), torch.randint(0, 32, (2, 16)), torch.randint(0, 32, (2, 16)))
