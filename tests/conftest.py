"""Shared pytest setup: tests marked `gpu` are skipped, with the reason, without a GPU."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if not gpu_items:
        return
    from tinyton.runtime import driver

    if driver.is_available():
        return
    skip = pytest.mark.skip(reason=f"no usable CUDA GPU: {driver.unavailable_reason()}")
    for item in gpu_items:
        item.add_marker(skip)
