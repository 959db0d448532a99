"""`tinyton.tools.tensor_descriptor.TensorDescriptor`, where Triton has `triton.tools.tensor_descriptor`."""

from tinyton.runtime.descriptors import TensorDescriptor

__all__ = ["TensorDescriptor"]
