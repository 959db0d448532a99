"""Code generation for fusion regions: `tta.fusion` → one tt kernel each (`tinyton-fusion-to-kernels`)."""

from tinyton.lowering.fusion.kernels import (
    FusionToKernelsPass,
    KernelParam,
    KernelSpec,
    Scratch,
    build_kernels,
    fusion_to_kernels,
)

__all__ = ["FusionToKernelsPass", "KernelParam", "KernelSpec", "Scratch", "build_kernels", "fusion_to_kernels"]
