"""The torch backend's indexing, scattering and searching ops that had run in torch: forward and backward against eager,
with nothing left to torch (CPU tensors on the simulator)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the torch backend's tests need torch (pip install torch)")
F = torch.nn.functional

from torch_checks import Lambda, check_forward_backward

import tinyton.torch as ttt


def exact(fn, *args) -> ttt.Explanation:
    """`fn` through the backend gives eager's results bit for bit (dtypes included, NaN where eager's), in tinyton."""
    e = ttt.explain(fn, *args)
    for got, want in zip(e.output, fn(*args), strict=True):
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, equal_nan=True, rtol=0, atol=0)
    assert not e.fallbacks, e.reasons
    return e


def test_cross_entropy_written_out_trains_in_tinyton() -> None:
    """Hand-written cross entropy, `-log_softmax(x)[arange(n), labels].mean()`: the gather of one element a row and
    its gradient (an accumulating `index_put` by paired index arrays, no outer product, which ran in torch: each
    gradient spread over its row, then a `[n, n] @ [n, vocabulary]` one-hot matmul), negative labels counting from
    the end, duplicates summed; a vocabulary of 4000."""
    torch.manual_seed(0)
    logits = torch.randn(6, 10, requires_grad=True)
    labels = torch.tensor([3, 0, 9, -1, 3, -10])
    loss = Lambda(lambda x, t: -x.log_softmax(-1)[torch.arange(x.shape[0]), t].mean())
    check_forward_backward(loss, logits, labels)
    check_forward_backward(loss, torch.randn(32, 4000, requires_grad=True), torch.randint(0, 4000, (32,)))
    check_forward_backward(Lambda(lambda x, t: x[torch.arange(2)[:, None], :, t] * 3),
                           torch.randn(2, 4, 5, requires_grad=True), torch.tensor([[1, -1, 1], [0, 4, 4]]))


ROLLS = [(2, 1, (3, 5)), ((2, -1), (1, 0), (3, 5)), (-3, None, (3, 5)), (7, -1, (3, 5)), (-8, (0,), (3, 5)),
         (0, 0, (3, 5)), ((1, 1), (0, 0), (3, 5)), (2, 1, (3, 0)), ((-1, 4), (-1, -3), (2, 3, 4))]


@pytest.mark.parametrize("shifts,dims,shape", ROLLS,
                         ids=["one", "two-dims", "flat-negative", "past-the-size", "negative-past-the-size", "zero",
                              "same-dim-twice", "empty-tensor", "3d"])
def test_roll_forward_and_backward(shifts, dims, shape) -> None:
    """`torch.roll`, any shifts and dims (negative, larger than the dim, zero, repeated, none: the flattened tensor),
    forward and backward."""
    torch.manual_seed(0)
    kwargs = {} if dims is None else {"dims": dims}

    def roll(x: torch.Tensor) -> torch.Tensor:
        return torch.roll(x * 2, shifts, **kwargs)

    if 0 in shape:
        exact(lambda x: (roll(x),), torch.randn(*shape))
    else:
        check_forward_backward(Lambda(roll), torch.randn(*shape, requires_grad=True))


BAD_INPUTS = {
    "roll-without-shifts": (lambda x: torch.roll(x, (), ()), (torch.randn(3),), "`shifts` required"),
    "roll-misaligned": (lambda x: torch.roll(x, (1, 2), (0,)), (torch.randn(3),), "shifts and dimensions must align"),
    "scatter_reduce-max": (lambda x, i: x.scatter_reduce(0, i, x, "max"), (torch.randn(3), torch.tensor([0, 2, 1])),
                           "reduce argument must be either sum, prod, mean, amax or amin"),
    "cdist-columns": (torch.cdist, (torch.randn(3, 2), torch.randn(4, 3)), "must have the same number of columns"),
    "searchsorted-rows": (torch.searchsorted, (torch.randn(2, 3), torch.randn(3, 3)),
                          "first N-1 dimensions of boundaries tensor and input value tensor must match"),
    "round-of-integers": (lambda x: torch.round(x, decimals=1), (torch.arange(3),), "not implemented for 'Long'"),
}


@pytest.mark.parametrize("name", BAD_INPUTS)
def test_bad_input_is_eagers_error(name: str) -> None:
    """Arguments eager refuses raise eager's error (dynamo's trace meets it; integers' round runs in torch)."""
    fn, args, message = BAD_INPUTS[name]
    with pytest.raises(Exception, match=message):
        ttt.explain(fn, *args)


def _accumulate_in_place(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    return (x * 1).index_put_((i,), torch.ones(2), accumulate=True)


OUT_OF_RANGE = {
    "index_put": (_assign_at := lambda x, i: x.index_put((i,), torch.ones(2)), torch.tensor([1, 7])),
    "index_put-negative": (_assign_at, torch.tensor([-6, 0])),
    "index_put-accumulate": (lambda x, i: x.index_put((i,), torch.ones(2), accumulate=True), torch.tensor([0, 5])),
    "index_put_-accumulate-negative": (_accumulate_in_place, torch.tensor([-6, 0])),
    "scatter_reduce": (lambda x, i: x.scatter_reduce(0, i, x[:2], "amax"), torch.tensor([0, 9])),
    "scatter_reduce-negative": (lambda x, i: x.scatter_reduce(0, i, x[:2], "sum"), torch.tensor([-1, 0])),
    "scatter-value": (_scatter_value := lambda x, i: x.scatter(0, i, 2.0), torch.tensor([1, 7])),
    "scatter-value-negative": (_scatter_value, torch.tensor([-1, 0])),
    "scatter-src": (_scatter_src := lambda x, i: x.scatter(0, i, x[:2] + 1), torch.tensor([5, 0])),
    "scatter-src-negative": (_scatter_src, torch.tensor([0, -5])),
    "scatter_add": (_scatter_add := lambda x, i: x.scatter_add(0, i, x[:2] + 1), torch.tensor([0, 5])),
    "scatter_add-negative": (_scatter_add, torch.tensor([-1, 0])),
}


@pytest.mark.parametrize("name", OUT_OF_RANGE)
def test_an_index_out_of_range_raises(name: str) -> None:
    """An index a user passes a scatter or `index_put` past its dim (or negative, for a scatter) raises as eager
    does, not a tensor with nothing written there: the rules of forward and inference graphs read each index through
    an elementwise bounds check (`checked_index`; a backward graph's scatters and accumulations, gradients, do not
    check)."""
    fn, index = OUT_OF_RANGE[name]
    x = torch.zeros(5)
    with pytest.raises((IndexError, RuntimeError), match="out of bounds"):  # eager's: IndexError, RuntimeError
        fn(x, index)
    with pytest.raises(Exception, match="out of bounds"):
        torch.compile(fn, backend="tinyton")(x, index)


def test_checked_scatters_in_range_are_eagers() -> None:
    """The checked forms (a user's `scatter`, `scatter_add`, accumulating `index_put`) give eager's results for
    indices in range: a scatter's last position, an accumulation's negative index counting from the end, in
    tinyton."""
    x, i = torch.arange(-7.0, 8.0).reshape(3, 5) / 4, torch.tensor([[4, 0], [1, 3], [2, 2]])  # exact sums
    rows = torch.tensor([-1, 0, -1])
    exact(lambda x: (x.scatter(1, i[:, :1], 2.0), x.scatter(1, i[:, 1:], x[:, :1] * 3), x.scatter_add(1, i, x[:, :2]),
                     x.index_put((rows,), x[0] * 2, accumulate=True), _accumulate_in_place(x[0], rows[:2] * 4)), x)


GRADIENT_SCATTERS = {
    "gather": (lambda x, t: x.gather(1, t[:, None]) * 3, "aten.scatter_add.default"),
    "cross_entropy": (lambda x, t: F.cross_entropy(x * 2, t), "aten.scatter.value"),
    "topk": (lambda x, t: (x * 2).topk(3).values * 3, "aten.scatter.src"),
    "indexing": (lambda x, t: x[:, t] * 2, "aten.index_put.default"),
}


@pytest.mark.parametrize("name", GRADIENT_SCATTERS)
def test_gradients_scatters_are_unchecked(name: str) -> None:
    """The scatters and accumulations autograd gives gradients (a backward graph's) do not check their indices, which
    the forward read: the backward keeps its launches (one; two for indexing's one-hot sum), nothing in torch."""
    torch.manual_seed(0)
    fn, op = GRADIENT_SCATTERS[name]
    e = check_forward_backward(Lambda(fn), torch.randn(6, 10, requires_grad=True), torch.tensor([3, 0, 9, 1, 3, 2]))
    backward = [g for g in e.report.groups if g.graph == "backward"]
    assert any(op in g.ops for g in backward), str(e)
    assert sum(g.last.num_launches for g in backward) == (2 if name == "indexing" else 1), str(e)


def _assign(x: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[i] = v * 2
    return y


def _assign_cells(x: torch.Tensor, i: torch.Tensor, j: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[:, i, j] = v
    return y.exp()


def test_index_put_assigns_and_its_gradient() -> None:
    """`x[i] = v` (rows, negative indices) and `x[:, i, j] = v` (paired arrays, a value broadcast), accumulate=False:
    eager's values, the gradient through both `x` (zero where written) and `v` (read back at the indices)."""
    torch.manual_seed(0)
    check_forward_backward(Lambda(_assign), torch.randn(5, 3, requires_grad=True), torch.tensor([0, -1, 2]),
                           torch.randn(3, 3, requires_grad=True))
    check_forward_backward(Lambda(_assign_cells), torch.randn(2, 4, 5, requires_grad=True),
                           torch.tensor([0, -1, 2]), torch.tensor([4, 0, -5]), torch.randn(2, 1, requires_grad=True))


def test_index_put_of_integers_and_bools() -> None:
    """Assignments into integer and bool tensors, and integer accumulations (repeats counted), are exact and keep
    their dtype."""
    ints, flags = torch.arange(12).reshape(3, 4), torch.zeros(3, 4, dtype=torch.bool)
    i, j = torch.tensor([2, -3]), torch.tensor([-1, 1])
    exact(lambda a, b: (a.index_put((i,), torch.tensor(7)), a.index_put((i, j), torch.tensor([5, 6])),
                        torch.ops.aten.index_put(b, [None, j], torch.tensor(True)),
                        a.index_put((j,), (a[0] * -2.7).long()),
                        a.index_put((torch.tensor([0, 2, 0, -3]),), a[:1] * 5, accumulate=True),
                        a.index_put((i, j), torch.tensor([3, 4]), accumulate=True)),
          ints, flags)


def _assign_masked(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    y = x * 2
    y[y < 0] = 0.5
    y[rows] = torch.tensor([1.0, 2.0, 3.0])
    torch.ops.aten.index_put_(y, [None, rows[:3]], torch.tensor(4.0), True)
    return y


def test_index_put_by_a_bool_mask_of_one_value() -> None:
    """`x[mask] = v` and `index_put_([None, mask], v, accumulate=True)` with one value (or one row) for every masked
    element: a select, forward and backward; values differing between the masked elements (data-dependent) run in
    torch."""
    torch.manual_seed(0)
    rows = torch.tensor([True, False, True, True])
    check_forward_backward(Lambda(_assign_masked), torch.randn(4, 3, requires_grad=True), rows)
    e = ttt.explain(lambda x, v: x.index_put((rows,), v), torch.randn(4, 3), torch.randn(3, 3))
    assert "differing between the masked elements" in e.reasons["aten.index_put.default"]


ACCUMULATIONS = {
    "rows": (lambda x, i, v: x.index_put((i,), v, accumulate=True), (4, 5), (5, 5)),
    "columns": (lambda x, i, v: torch.ops.aten.index_put(x, [None, i], v, True), (4, 5), (4, 5)),
    "paired": (lambda x, i, v: x.index_put((i, -i), v, accumulate=True), (4, 5), (5,)),
    "2-d-index": (lambda x, i, v: torch.ops.aten.index_put(x, [None, i.reshape(1, 5)], v, True), (4, 5), (4, 1, 5)),
    "three-paired": (lambda x, i, v: torch.ops.aten.index_put(x, [None, i, i[:, None] + 1, -i], v, True),
                     (2, 4, 5, 6), (2, 1, 5)),
}


@pytest.mark.parametrize("where", ACCUMULATIONS)
def test_index_put_accumulates_duplicates(where: str) -> None:
    """`index_put_(accumulate=True)` counts every write of a repeated index (negative ones from the end), forward and
    backward, by one index array or several (paired, broadcast together, with whole dims around them)."""
    torch.manual_seed(0)
    fn, shape, values = ACCUMULATIONS[where]
    i = torch.tensor([1, -3, 1, 3, 1])
    check_forward_backward(Lambda(fn), torch.randn(*shape, requires_grad=True), i,
                           torch.randn(*values, requires_grad=True))


def test_unfold_backward_runs_in_tinyton() -> None:
    """`F.unfold` (`nn.Unfold`) with kernel, dilation, padding and stride: its gradient (an accumulating `index_put`
    of every window back into the image) ran in torch."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 6, requires_grad=True)
    check_forward_backward(Lambda(lambda x: F.unfold(x, 2)), x)
    unfold = torch.nn.Unfold((3, 2), dilation=(1, 2), padding=1, stride=(2, 1))
    check_forward_backward(unfold, x.detach().requires_grad_())


REDUCES = ["sum", "prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("include_self", [True, False], ids=["with-self", "without-self"])
@pytest.mark.parametrize("reduce", REDUCES)
def test_scatter_reduce_forward_and_backward(reduce: str, include_self: bool) -> None:
    """`scatter_reduce` along any dim, repeated indices, positions none writes: eager's values and gradients
    (amax/amin's split evenly between tied maxima, as eager's)."""
    torch.manual_seed(0)
    base, src = torch.randn(3, 5, requires_grad=True), torch.randn(3, 4, requires_grad=True)
    index = torch.tensor([[0, 2, 2, 4], [1, 1, 1, 1], [4, 3, 0, 3]])
    check_forward_backward(Lambda(lambda b, s: b.scatter_reduce(1, index, s, reduce, include_self=include_self)),
                           base, src)
    b3, s3, i3 = torch.randn(4, 2, 3), torch.randn(5, 2, 3), torch.randint(0, 4, (5, 2, 3))
    check_forward_backward(Lambda(lambda b, s: b.scatter_reduce(0, i3, s, reduce, include_self=include_self) * 2),
                           b3.requires_grad_(), s3.requires_grad_())


@pytest.mark.parametrize("include_self", [True, False], ids=["with-self", "without-self"])
def test_scatter_reduce_of_integers_and_nans(include_self: bool) -> None:
    """Integer scatter_reduce is exact (mean rounded down, as eager's floor division; amax/amin from the dtype's
    bounds); a NaN written (or in `self`, with include_self) makes amax and amin NaN, as eager's; a source longer
    than the index is read over the index's extent."""
    ints, isrc = torch.tensor([[7, -3, 0, 5]]), torch.tensor([[-8, 9, 9, 2, -1, 6]])
    iindex = torch.tensor([[1, 1, 3, 1, 0]])
    x, src = torch.tensor([[1.0, float("nan"), 2.0, 0.5]]), torch.tensor([[3.0, float("nan"), -1.0, 0.0, 4.0, 1.0]])
    exact(lambda a, s, x, t: tuple(y.scatter_reduce(-1, iindex, z, r, include_self=include_self)
                                   for r in REDUCES for y, z in ((a, s), (x, t))), ints, isrc, x, src)


def test_round_to_decimals() -> None:
    """`torch.round(x, decimals=d)`, positive, zero and negative d: eager's values (halves to even, of the scaled
    value), float16 in float32 as eager's, a zero gradient."""
    x = torch.tensor([1.25, 2.5, -0.125, 0.005, 1234.5, -1250.0, 0.0, float("nan"), float("inf"), 3.14159])
    exact(lambda x: (*(torch.round(x, decimals=d) for d in (2, 1, 0, -1, -2, 3)), torch.round(x.half(), decimals=2)), x)
    check_forward_backward(Lambda(lambda x: torch.round(x * 3, decimals=1) + x), torch.randn(4, 5, requires_grad=True))


@pytest.mark.parametrize("right", [False, True], ids=["left", "right"])
def test_searchsorted_and_bucketize(right: bool) -> None:
    """`torch.searchsorted` (1-D and row-wise boundaries, ties, values past both ends, `side=`, `sorter=`,
    `out_int32`, a scalar) and `torch.bucketize`: eager's indices and dtypes, NaNs included (a NaN value goes last;
    NaNs among the boundaries where eager's binary search meets them)."""
    torch.manual_seed(0)
    nan = float("nan")
    seq = torch.tensor([-1.0, 0.0, 0.0, 0.5, 2.0, 2.0, 2.0, 7.0])
    values = torch.tensor([[0.0, 2.0, -5.0], [9.0, nan, 0.25]])
    rows = torch.sort(torch.randn(2, 3, 9)).values
    row_values = torch.cat([rows[..., :4], torch.randn(2, 3, 3)], -1)
    with_nans, unsorted = torch.tensor([1.0, 2.0, nan]), torch.tensor([3.0, 1.0, 2.0, 0.5, 6.0])
    side = "right" if right else "left"

    def f(seq, values, rows, row_values, with_nans, unsorted):
        return (torch.searchsorted(seq, values, right=right), torch.searchsorted(rows, row_values, side=side),
                torch.searchsorted(seq, values, right=right, out_int32=True),
                torch.searchsorted(with_nans, values, right=right), torch.searchsorted(unsorted, values, right=right),
                torch.searchsorted(unsorted, values, sorter=torch.argsort(unsorted), right=right),
                torch.searchsorted(seq, 2.0, right=right), torch.bucketize(values, seq, right=right),
                torch.searchsorted(seq.int(), (values * 2).nan_to_num().int(), right=right))

    exact(f, seq, values, rows, row_values, with_nans, unsorted)


@pytest.mark.parametrize("p", [2.0, 1.0, 0.5, 1.5, 3.0, float("inf"), 0.0])
def test_cdist_forward_and_backward(p: float) -> None:
    """`torch.cdist` for p = 2, 1, fractional, 3, inf and 0, batched (batch dims broadcast), forward and both
    gradients; equal rows (a zero distance: its gradient zero, as eager's) and equal coordinates included."""
    torch.manual_seed(0)
    x1, x2 = torch.randn(2, 5, 3), torch.randn(1, 4, 3)
    x2[0, 1] = x1[1, 2]
    x2[0, 2, 0] = x1[0, 3, 0]
    check_forward_backward(Lambda(lambda a, b: torch.cdist(a, b, p=p)), x1.requires_grad_(), x2.requires_grad_())


def test_empty_indices_write_nothing() -> None:
    """`index_put` (assigning or accumulating) and the scatters by an empty index give `self` unchanged, in
    tinyton."""
    x, none = torch.randn(4, 3), torch.tensor([], dtype=torch.long)
    one = torch.tensor(1.0)
    exact(lambda x: (x.index_put((none,), one), x.index_put((none,), one, accumulate=True),
                     x.index_put((none, none), one), x.scatter_reduce(0, none.reshape(0, 3), x[:0], "amax"),
                     x.scatter_add(0, none.reshape(0, 3), x[:0])), x)
