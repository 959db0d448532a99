"""The data: first names shipped by the `names` package, a character tokenizer, a fixed-seed split.

Karpathy's microgpt trains on a list of names; the `names` package ships the US census first-name lists
(male and female), so nothing is downloaded at run time. The tokenizer is tokens.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import names
import numpy as np
from tokens import BOS, LETTERS, VOCAB, decode, encode

__all__ = ["BOS", "VOCAB", "Batches", "decode", "encode", "load_names", "split", "tokenize"]


def load_names() -> list[str]:
    """Every distinct first name of the package's lists, lower-cased, sorted (so the split is reproducible)."""
    folder = os.path.dirname(names.__file__)
    found = set()
    for kind in ("dist.male.first", "dist.female.first"):
        with open(os.path.join(folder, kind)) as f:
            found.update(line.split()[0].lower() for line in f if line.strip())
    return sorted(n for n in found if n.isalpha() and set(n) <= set(LETTERS))


@dataclass
class Batches:
    """Names as padded token rows: inputs `BOS + name`, targets `name + BOS`, a loss mask for the padding."""

    inputs: np.ndarray
    targets: np.ndarray
    mask: np.ndarray

    def __len__(self) -> int:
        return len(self.inputs)

    def rows(self, index: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.inputs[index], self.targets[index], self.mask[index]


def tokenize(words: list[str], block_size: int) -> Batches:
    """Names longer than `block_size - 1` letters are cut (their last targets are letters, not BOS)."""
    n = len(words)
    inputs = np.full((n, block_size), BOS, np.int32)
    targets = np.full((n, block_size), BOS, np.int32)
    mask = np.zeros((n, block_size), np.float32)
    for i, word in enumerate(words):
        seq = [BOS, *encode(word), BOS][: block_size + 1]
        inputs[i, : len(seq) - 1] = seq[:-1]
        targets[i, : len(seq) - 1] = seq[1:]
        mask[i, : len(seq) - 1] = 1.0
    return Batches(inputs, targets, mask)


def split(block_size: int, seed: int = 42, val_fraction: float = 0.1) -> tuple[Batches, Batches]:
    """Shuffled train and validation sets (the same for every run with the same seed)."""
    words = load_names()
    order = np.random.default_rng(seed).permutation(len(words))
    n_val = int(len(words) * val_fraction)
    shuffled = [words[i] for i in order]
    return tokenize(shuffled[n_val:], block_size), tokenize(shuffled[:n_val], block_size)
