"""The differential fuzzer as a standing check: seeded random array programs (tests/fuzz/generate.py) must
give the NumPy reference's result (tests/fuzz/reference.py) both fused and unfused.

`TINYTON_FUZZ_CASES` (default 2000) and `TINYTON_FUZZ_SEED` choose the cases; a failure names its seed and
index, and `python tests/fuzz/run.py --seed S --index I --show` reproduces it with its source.
scripts/fuzz-gpu.sh runs the larger GPU campaign.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fuzz.generate import generate
from fuzz.run import DEFAULT_CASES, DEFAULT_SEED, check

SEED = int(os.environ.get("TINYTON_FUZZ_SEED", DEFAULT_SEED))
CASES = int(os.environ.get("TINYTON_FUZZ_CASES", DEFAULT_CASES))


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
    for feature in ("tt.exp(", "tt.log(", "tt.sqrt(", "tt.rsqrt(", "tt.where(", "tt.maximum(", "tt.minimum(",
                    " @ ", ".T", "tt.transpose(", "keepdims=True", "axis=None", "axis=(", "axis=-", "[None]",
                    ".astype(tt.float16)", ".astype(tt.int1)", " // ", " % ", " ** ", " << ", " == ", "~"):  # fmt: skip
        assert feature in text, feature
    dtypes = {str(x.dtype) for c in cases for x in c.inputs}
    ranks = {x.ndim for c in cases for x in c.inputs}
    assert dtypes == {"float32", "float16", "float64", "int8", "int32", "int64", "bool"} and ranks == {0, 1, 2, 3, 4}
    assert {c.kind for c in cases} == {"small", "scalar", "empty", "row"}
    assert max(x.shape[-1] for c in cases for x in c.inputs if c.kind == "row") >= 16385
