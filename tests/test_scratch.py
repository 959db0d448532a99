"""The intermediates' block kept per thread and stream (tinyton/runtime/scratch.py), alone and in the
generated call path of array programs on the stand-in GPU."""

from __future__ import annotations

import threading

import pytest
from standin_gpu import standin_gpu

import tinyton as tt
from tinyton.compiler import launch_plan
from tinyton.runtime import driver
from tinyton.runtime.scratch import Scratch

torch = pytest.importorskip("torch")


@tt.jit
def softmax_colsum(x):
    """Two launches with an intermediate (the softmax) between them."""
    e = tt.exp(x - tt.max(x, axis=-1, keepdims=True))
    return (e / tt.sum(e, axis=-1, keepdims=True)).sum(axis=0)


class Blocks:
    """A fake allocator: block i is the int i, at address 4096 * i; remembers each block's owner stream."""

    def __init__(self) -> None:
        self.owners: list[int] = []

    def allocate(self, nbytes: int, stream: int | None) -> int:
        self.owners.append(stream)
        return len(self.owners)

    @staticmethod
    def address(block: int) -> int:
        return 4096 * block


def capturing(monkeypatch: pytest.MonkeyPatch, streams: set[int]) -> list[int]:
    """Streams in `streams` read as captured; returns the list of streams asked about."""
    asked: list[int] = []
    monkeypatch.setattr(driver, "stream_capturing", lambda s: asked.append(s) or s in streams)
    return asked


def test_one_block_per_stream_and_thread_grown_when_needed(monkeypatch) -> None:
    asked = capturing(monkeypatch, set())
    blocks = Blocks()
    scratch = Scratch(blocks.allocate, blocks.address)
    first = scratch(0, 100)
    assert scratch(0, 100) is first and scratch(0, 50) is first  # reused, no driver call on stream 0
    assert asked == []
    other = scratch(7, 100)
    assert other != first and blocks.owners == [0, 7] and asked == [7]  # owned by its stream
    grown = scratch(0, 200)
    assert grown != first and scratch(0, 100) is grown and scratch.blocks() == {0: 200, 7: 100}
    seen = []
    thread = threading.Thread(target=lambda: seen.append((scratch(0, 100), scratch.blocks())))
    thread.start()
    thread.join()
    assert seen[0][0] not in (first, other, grown) and seen[0][1] == {0: 100}  # its own block


def test_a_captured_stream_gets_a_fresh_block_per_call_never_kept(monkeypatch) -> None:
    capturing(monkeypatch, {7})
    blocks = Blocks()
    scratch = Scratch(blocks.allocate, blocks.address)
    kept = scratch(0, 100)
    assert len({scratch(7, 100) for _ in range(3)}) == 3  # a graph bakes each address in: none is reused
    assert scratch.blocks() == {0: 100} and scratch(0, 100) is kept and blocks.owners == [0, None, None, None]


def intermediate_address(launches: list) -> int:
    (_, _, (_, address)), (_, _, (address_again, _)) = launches
    assert address == address_again
    return address


def test_calls_reuse_their_streams_block(monkeypatch) -> None:
    capturing(monkeypatch, set())
    x = torch.randn(32, 2048)
    with standin_gpu(softmax_colsum, record=True) as launches:
        softmax_colsum(x)
        first = intermediate_address(launches)
        launches.clear()
        softmax_colsum(x)
        assert intermediate_address(launches) == first  # the same block, no allocation
        launches.clear()
        with tt.stream(7):
            softmax_colsum(x)
        assert intermediate_address(launches) != first  # another stream, another block
        launches.clear()
        softmax_colsum(torch.randn(64, 2048))  # a larger intermediate: the block grows
        launches.clear()
        softmax_colsum(x)
        assert intermediate_address(launches) != first


def test_captures_and_large_programs_allocate_per_call(monkeypatch) -> None:
    asked = capturing(monkeypatch, {7})
    x = torch.randn(32, 2048)
    with standin_gpu(softmax_colsum), tt.stream(7):
        softmax_colsum(x), softmax_colsum(x)  # "captured": a fresh block each
        run = softmax_colsum.compile(x).runner((x,))
        assert "SCRATCH(s, " in run.source and 7 not in run.__globals__["SCRATCH"].blocks() and asked == [7, 7]
    monkeypatch.setattr(launch_plan, "MAX_SCRATCH_BYTES", 1024)
    with standin_gpu(softmax_colsum):
        source = softmax_colsum.compile(x).runner((x,)).source
        assert "SCRATCH" not in source and source.count(".new_empty(") == 2  # output, intermediates
