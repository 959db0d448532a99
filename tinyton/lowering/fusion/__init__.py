"""Code generation for fusion regions: `tta.fusion` → one tt kernel each (`tinyton-fusion-to-kernels`)."""

from tinyton.lowering.fusion.kernel_spec import KernelParam, KernelSpec, put_destinations
from tinyton.lowering.fusion.kernels import FusionToKernelsPass, Scratch, build_kernels, fusion_to_kernels
from tinyton.lowering.fusion.launch_groups import KernelGroup, group_launches

__all__ = ["FusionToKernelsPass", "KernelGroup", "KernelParam", "KernelSpec", "Scratch", "build_kernels",
           "fusion_to_kernels", "group_launches", "put_destinations"]
