"""The character tokenizer: the 26 lower-case letters plus one boundary token (BOS, id 26) that both starts
and ends a name, a vocabulary of 27. Apart from data.py so that sampling and the benchmark need no name lists.
"""

from __future__ import annotations

LETTERS = "abcdefghijklmnopqrstuvwxyz"
BOS = len(LETTERS)
VOCAB = len(LETTERS) + 1


def encode(name: str) -> list[int]:
    return [LETTERS.index(c) for c in name]


def decode(tokens: list[int]) -> str:
    return "".join(LETTERS[t] for t in tokens if t != BOS)
