"""`tinyton.tools`, as Triton's `triton.tools`: host-side helpers (`tensor_descriptor`)."""

from tinyton.tools import tensor_descriptor

__all__ = ["tensor_descriptor"]
