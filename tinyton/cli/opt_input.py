"""What `tinyton-opt` checks before running a pass: its input file and its `-p` pipeline.

xDSL's driver lets Python's exceptions escape for a missing file, bytes that are not UTF-8 or a pass
that does not exist; these checks turn each into one `tinyton-opt: error: ...` line that says what to
change. `LocatingParser` gives every parsed op its `file:line:col` as its location (as mlir-opt does),
so the passes' own input checks can point at the offending op in the user's .mlir file.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
from bisect import bisect_right
from collections.abc import Callable, Mapping

from xdsl.dialects.builtin import (
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    StringAttr,
    UnknownLoc,
)
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.utils.arg_spec import parse_pipeline
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException

from tinyton.errors import op_error
from tinyton.passes import ALL_PASSES


class UsageError(Exception):
    """A bad command line or input file: printed as one line, exit code 1."""


class LocatingParser(Parser):
    """xDSL's parser, recording where each op starts in the input as its `loc(file:line:col)`."""

    def __init__(self, ctx, text: str, name: str):
        super().__init__(ctx, text, name)
        self._name = StringAttr(name)
        self._line_starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def parse_operation(self) -> Operation:
        start = self._current_token.span.start
        op = super().parse_operation()
        if isinstance(op.location, UnknownLoc):
            line = bisect_right(self._line_starts, start)
            column = start - self._line_starts[line - 1] + 1
            op.location = FileLineColLoc(self._name, IntAttr(line), IntAttr(column))
        return op


def verify_located(module: ModuleOp) -> None:
    """Verify op by op, so that an invalid op is reported at its line (`x.mlir:3:5: tta.add: ...`)
    rather than under a dump of the whole module."""
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except DiagnosticException as e:
            raise op_error(op, str(e).splitlines()[0].removeprefix("Operation does not verify: ")) from None


def check_input_file(path: str | None) -> None:
    """A readable regular file (None is stdin)."""
    if path is None:
        return
    if not os.path.exists(path):
        raise UsageError(f"no such file: {path}; give an .mlir file of tt or tta ops (or - for stdin)")
    if os.path.isdir(path):
        raise UsageError(f"{path} is a directory; give an .mlir file of tt or tta ops")
    if not os.access(path, os.R_OK):
        raise UsageError(f"cannot read {path}: permission denied")


def decode_input(data: bytes, name: str) -> str:
    """The input as text, or a UsageError for a binary or empty file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(
            f"{name} is not an MLIR text file: byte {e.start} (0x{data[e.start]:02x}) is not UTF-8 text; "
            "give the textual IR (tinyton-opt prints it, e.g. `tinyton compile ... --emit tt`)"
        ) from None
    if not text.strip():
        raise UsageError(f"{name} is empty; give a module of tt kernels or tta array programs")
    return text


def _pass_options(cls: type[ModulePass]) -> str:
    """`tinyton-to-llvm takes num_warps (int | None), e.g. -p 'tinyton-to-llvm{num_warps=...}'`."""
    options = dataclasses.fields(cls) if dataclasses.is_dataclass(cls) else ()
    if not options:
        return f"{cls.name} takes no options: write -p {cls.name}"
    described = ", ".join(f"{f.name} ({f.type})" for f in options)
    return f"{cls.name} takes {described}, e.g. -p '{cls.name}{{{options[0].name}=...}}'"


def check_pipeline(spec: str, passes: Mapping[str, Callable[[], type[ModulePass]]]) -> None:
    """Every pass of `-p` exists and accepts its options (xDSL raises bare ValueErrors for these)."""
    try:
        specs = list(parse_pipeline(spec))
    except ArgSpecParseError as e:
        raise UsageError(f"cannot parse the pass pipeline -p '{spec}': {e}\n(write -p 'pass-a,pass-b{{option=value}}')") from None
    for item in specs:
        if item.name not in passes:
            close = difflib.get_close_matches(item.name, list(passes), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise UsageError(
                f"unknown pass '{item.name}' in -p; {hint}tinyton's passes are {', '.join(ALL_PASSES)} "
                "(--help lists every pass)"
            )
        cls = passes[item.name]()
        try:
            cls.from_pass_spec(item)
        except ValueError as e:
            raise UsageError(f"bad option for pass {item.name}: {e}; {_pass_options(cls)}") from None
