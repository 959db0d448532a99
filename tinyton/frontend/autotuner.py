"""`@tt.autotune` and `@tt.heuristics`: choose a kernel's meta-parameters at launch, with Triton's API.

`Autotuner` times every `Config` (after `prune_configs_by`) the first time it meets a new value of its
`key` arguments (and argument dtypes), keeps the fastest in memory and in the disk cache (per GPU, kernel
source, key and configs: tinyton/runtime/cache.py), and launches with it; later launches with that key
go straight to the kernel. On the simulator nothing is timed: the first config is taken. `Heuristics`
computes meta-parameters from the arguments on every launch. Both wrap a `@tt.jit` kernel (or each
other) and are launched like it: `kernel[grid](...)`, the grid callable receiving the chosen values.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from tinyton.frontend.jit import JITFunction
from tinyton.lazy import lazy_module

# Tuning needs these (and NumPy) at the first launch, not at decoration (tinyton/lazy.py).
bench = lazy_module("tinyton.runtime.bench")
runtime_cache = lazy_module("tinyton.runtime.cache")
driver = lazy_module("tinyton.runtime.driver")


class Config:
    """One point of the search: meta-parameters `kwargs` plus launch options (Triton's `triton.Config`)."""

    def __init__(
        self,
        kwargs: dict[str, Any],
        num_warps: int = 4,
        num_stages: int = 3,
        num_ctas: int = 1,
        maxnreg: int | None = None,
        pre_hook: Callable[[dict[str, Any]], Any] | None = None,
    ):
        self.kwargs, self.pre_hook = dict(kwargs), pre_hook
        self.num_warps, self.num_stages, self.num_ctas, self.maxnreg = num_warps, num_stages, num_ctas, maxnreg

    def all_kwargs(self) -> dict[str, Any]:
        options = {"num_warps": self.num_warps, "num_stages": self.num_stages, "num_ctas": self.num_ctas}
        return {**self.kwargs, **options, **({"maxnreg": self.maxnreg} if self.maxnreg is not None else {})}

    def __str__(self) -> str:
        return ", ".join(f"{k}: {v}" for k, v in self.all_kwargs().items())

    __repr__ = __str__


def base_kernel(fn: Any) -> JITFunction:
    """The `@tt.jit` function under a stack of autotune/heuristics wrappers."""
    while not isinstance(fn, JITFunction):
        fn = fn.fn
    return fn


def named_arguments(kernel: JITFunction, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The launch's arguments by parameter name, defaults filled in, extra keywords kept."""
    named = {p.name: p.default for p in kernel.params if p.default is not inspect.Parameter.empty}
    named.update(zip((p.name for p in kernel.params), args))
    named.update(kwargs)
    return named


class _Wrapper:
    """What autotune and heuristics share: launched like the kernel, other attributes from it."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.base = base_kernel(fn)
        functools.update_wrapper(self, self.base.fn)

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.run, grid)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.fn, name)

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


class Heuristics(_Wrapper):
    """Meta-parameters computed from the arguments (`{"EVEN_K": lambda args: args["K"] % 64 == 0}`)."""

    def __init__(self, fn: Any, values: dict[str, Callable[[dict[str, Any]], Any]]):
        super().__init__(fn)
        self.values = values

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        named = named_arguments(self.base, args, kwargs)
        for name, rule in self.values.items():
            kwargs[name] = named[name] = rule(named)
        return self.fn[grid](*args, **kwargs)


class Autotuner(_Wrapper):
    """Times `configs` once per key value and launches with the fastest (`best_config`)."""

    def __init__(
        self,
        fn: Any,
        configs: Sequence[Config],
        key: Sequence[str],
        prune_configs_by: dict[str, Any] | None = None,
        reset_to_zero: Sequence[str] | None = None,
        restore_value: Sequence[str] | None = None,
        warmup: float = 25,
        rep: float = 100,
    ):
        super().__init__(fn)
        self.configs = list(configs) or [Config({})]
        self.keys = list(key)
        self.prune_configs_by = prune_configs_by or {}
        self.reset_to_zero, self.restore_value = list(reset_to_zero or ()), list(restore_value or ())
        self.warmup, self.rep = warmup, rep
        self.cache: dict[tuple, Config] = {}
        self.best_config: Config | None = None
        self.bench_timings: dict[Config, Any] = {}

    def run(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        named = named_arguments(self.base, args, kwargs)
        key = (
            *(named[k] for k in self.keys),
            *(str(v.dtype) for v in named.values() if hasattr(v, "dtype") and hasattr(v, "shape")),
        )
        config = self.cache.get(key)
        if config is None:
            config = self.cache[key] = self._tune(key, grid, args, kwargs, named)
        self.best_config = config
        return self._launch(config, grid, args, kwargs, named)

    def _launch(self, config: Config, grid: Any, args: tuple, kwargs: dict[str, Any], named: dict[str, Any]) -> Any:
        clash = set(config.kwargs) & set(kwargs)
        if clash:
            raise ValueError(f"conflicting meta-parameters {', '.join(sorted(clash))}: the autotuner's configs set them")
        if config.pre_hook is not None:
            config.pre_hook({**named, **config.all_kwargs()})
        return self.fn[grid](*args, **kwargs, **config.all_kwargs())

    def _record_key(self, key: tuple) -> str:
        """Names the tuning result on disk: GPU, kernel source, key value and configs."""
        gpu = driver.device().name if driver.is_available() else "simulator"
        source = ast.dump(self.base.kernel_source().tree)
        text = repr((gpu, self.base.fn.__qualname__, source, key, [str(c) for c in self.configs]))
        return hashlib.sha256(text.encode()).hexdigest()

    def prune(self, named: dict[str, Any], kwargs: dict[str, Any]) -> list[Config]:
        configs = self.configs
        early = self.prune_configs_by.get("early_config_prune")
        if early is not None:
            configs = list(early(configs, named, **kwargs))
        model, top_k = self.prune_configs_by.get("perf_model"), self.prune_configs_by.get("top_k")
        if model is not None and top_k is not None:
            count = int(len(configs) * top_k) if isinstance(top_k, float) and top_k <= 1 else int(top_k)
            configs = sorted(configs, key=lambda c: model(**{**named, **c.all_kwargs()}))[: max(count, 1)]
        return configs

    def _tune(self, key: tuple, grid: Any, args: tuple, kwargs: dict[str, Any], named: dict[str, Any]) -> Config:
        record_key = self._record_key(key)
        index = runtime_cache.default_cache().get_record("autotune", record_key)
        if isinstance(index, int) and 0 <= index < len(self.configs):
            return self.configs[index]
        configs = self.prune(named, kwargs)
        if driver.backend() != "cuda" or len(configs) == 1:
            return configs[0]  # the simulator's timings say nothing about the GPU: take the first
        saved = {name: _snapshot(named[name]) for name in self.restore_value}
        try:
            self.bench_timings = {c: self._bench(c, grid, args, kwargs, named) for c in configs}
        finally:
            for name, copy in saved.items():
                _restore(named[name], copy)
        best = min(configs, key=lambda c: self.bench_timings[c][0])
        runtime_cache.default_cache().put_record("autotune", record_key, self.configs.index(best))
        return best

    def _bench(self, config: Config, grid: Any, args: tuple, kwargs: dict[str, Any], named: dict[str, Any]) -> list[float]:
        def launch() -> None:
            for name in self.reset_to_zero:
                _zero(named[name])
            self._launch(config, grid, args, kwargs, named)

        try:
            return bench.do_bench(launch, warmup=self.warmup, rep=self.rep, quantiles=(0.5, 0.2, 0.8))
        except Exception:  # a config that does not compile or launch (too much shared memory, ...)
            return [float("inf")] * 3


def _zero(array: Any) -> None:
    if hasattr(array, "zero_"):
        array.zero_()
    else:
        array[...] = 0


def _snapshot(array: Any) -> Any:
    return array.clone() if hasattr(array, "clone") else array.copy()


def _restore(array: Any, copy: Any) -> None:
    if hasattr(array, "copy_"):
        array.copy_(copy)
    else:
        array[...] = copy


def autotune(
    configs: Sequence[Config],
    key: Sequence[str],
    prune_configs_by: dict[str, Any] | None = None,
    reset_to_zero: Sequence[str] | None = None,
    restore_value: Sequence[str] | None = None,
    pre_hook: Callable[..., Any] | None = None,
    post_hook: Callable[..., Any] | None = None,
    warmup: float = 25,
    rep: float = 100,
    use_cuda_graph: bool = False,
    do_bench: Callable[..., Any] | None = None,
    cache_results: bool = True,
) -> Callable[[Any], Autotuner]:
    """Triton's `triton.autotune` (`pre_hook`, `post_hook`, `use_cuda_graph`, `do_bench` and
    `cache_results` are accepted; tinyton always remembers results on disk)."""
    return lambda fn: Autotuner(fn, configs, key, prune_configs_by, reset_to_zero, restore_value, warmup, rep)


def heuristics(values: dict[str, Callable[[dict[str, Any]], Any]]) -> Callable[[Any], Heuristics]:
    """Triton's `triton.heuristics`: meta-parameters computed from the named arguments."""
    return lambda fn: Heuristics(fn, values)
