"""take_along_axis with float indices: NumPy's error, the shapes and dtypes, and the cast to make."""

import numpy as np

import tinyton as tt
from tinyton.errors import CompilationError

ERROR = CompilationError
ADVICE = "take_along_axis: `indices` must be an integer array, got float32 of shape (4, 1); cast it, indices.astype(np.int32)"


@tt.jit
def program(logp, labels):
    return np.take_along_axis(logp, labels[:, None], axis=-1)  # error


def trigger() -> None:
    program(np.zeros((4, 10), np.float32), np.zeros(4, np.float32))
