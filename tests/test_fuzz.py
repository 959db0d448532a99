"""The differential fuzzer as a standing check: seeded random array programs (tests/fuzz/generate.py) must
give the NumPy reference's result (tests/fuzz/reference.py) both fused and unfused.

`TINYTON_FUZZ_CASES` (default 250: about 30 s on the simulator, new kernels compiled) and `TINYTON_FUZZ_SEED`
choose the cases; a failure names its seed and index, and `python tests/fuzz/run.py --seed S --index I --show` reproduces it with its source.
scripts/fuzz-gpu.sh runs the larger GPU campaign.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fuzz.draw_numpy import UFUNCS_1, UFUNCS_2
from fuzz.generate import generate
from fuzz.run import DEFAULT_SEED, check

SEED = int(os.environ.get("TINYTON_FUZZ_SEED", DEFAULT_SEED))
CASES = int(os.environ.get("TINYTON_FUZZ_CASES", "250"))


@pytest.fixture(scope="module")
def program_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("index", range(CASES))
def test_fuzz(index: int, program_dir: Path) -> None:
    outcome = check(generate(SEED, index), program_dir)
    assert not outcome.problems, outcome.report()


def test_generator_is_deterministic_and_covers_the_brief() -> None:
    """Same seed, same programs; and the drawn programs use every feature the fuzzer promises."""
    assert generate(SEED, 5).source == generate(SEED, 5).source
    cases = [generate(SEED, i) for i in range(400)]
    text = "\n".join(c.source for c in cases)
    ufuncs = [f"tt.{name}(" for name in UFUNCS_1 + UFUNCS_2]
    for feature in ("tt.exp(", "tt.log(", "tt.sqrt(", "tt.rsqrt(", "tt.where(", "tt.maximum(", "tt.minimum(",
                    " @ ", ".T", "tt.transpose(", "keepdims=True", "axis=None", "axis=(", "axis=-", "[None]",
                    ".astype(tt.float16)", ".astype(tt.int1)", " // ", " % ", " ** ", " << ", " == ", "~",
                    *ufuncs, "tt.clip(", ".astype(tt.float64)", ".astype(tt.int64)", ".astype(tt.int8)",
                    ".astype(tt.uint8)", "tt.prod(", "tt.argmax(", "tt.argmin(", "tt.var(", "tt.std(", "ddof=1",
                    "tt.any(", "tt.all(", "tt.logsumexp(", "tt.cumsum(", "tt.cumprod(", "tt.take_along_axis(",
                    "::-1", ":-2]", "[..., ", "None, ", "tt.concatenate(", "tt.stack(", "tt.split(", "tt.flip(",
                    "tt.pad(", "constant_values=", "tt.repeat(", "tt.tile(", "tt.squeeze(", "tt.expand_dims(",
                    "tt.moveaxis(", "tt.ravel(", "tt.sort(", "tt.argsort(",
                    "0.7978845608028654", "* tt.sigmoid(", "tt.concatenate([-", "tt.var(v", "- tt.logsumexp(",
                    "-tt.mean(tt.take_along_axis(", "< 0.5, axis=-1)"):  # fmt: skip
        assert feature in text, feature
    assert re.search(r"\[[^]]*\[-?\d", text), "a constant index list"
    assert re.search(r"v\d+\[(\.\.\., |:, )*v\d+\]", text), "a traced index array"
    dtypes = {str(x.dtype) for c in cases for x in c.inputs}
    ranks = {x.ndim for c in cases for x in c.inputs}
    assert dtypes == {"float64", "float32", "float16", "int64", "int32", "int8", "uint8", "bool"}
    assert ranks == {0, 1, 2, 3, 4}
    assert {c.kind for c in cases} == {"small", "scalar", "empty", "row"}
    assert max(x.shape[-1] for c in cases for x in c.inputs if c.kind == "row") >= 16385
