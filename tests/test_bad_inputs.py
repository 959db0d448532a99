"""The bad-input corpus (tests/bad_inputs/): every bad input gets a clear error, never a traceback.

- `python/*.py`: one case each, run in-process. `ERROR` is the error class, `ADVICE` a part of the message
  that says what to change, and the line marked `# error` is the user's line the message must name
  (`file:line:col: ...`). `ERROR = None` marks unusual input that must simply work (`trigger` checks it).
- `mlir/*.mlir` and `compile/*`: inputs of `tinyton-opt` and `tinyton compile`, run as subprocesses: the
  exit code is 1, stderr is one `error:` message with the file:line (of the IR op, for .mlir inputs) and
  the advice, and no "Traceback".
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tinyton.errors import CompilationError

CORPUS = Path(__file__).parent / "bad_inputs"
ROOT = Path(__file__).parent.parent
PYTHON_CASES = sorted((CORPUS / "python").glob("*.py"))


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bad_input_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _marked_line(path: Path) -> int:
    lines = path.read_text().splitlines()
    return 1 + next(i for i, text in enumerate(lines) if text.rstrip().endswith("# error"))


@pytest.mark.parametrize("path", PYTHON_CASES, ids=[p.stem for p in PYTHON_CASES])
def test_python_case(path: Path) -> None:
    case = _load(path)
    if case.ERROR is None:
        case.trigger()
        return
    with pytest.raises(CompilationError) as info:
        case.trigger()
    error = info.value
    assert isinstance(error, case.ERROR), f"{type(error).__name__}: {error}"
    text = str(error)
    assert text.startswith(f"{path}:{_marked_line(path)}:"), text
    assert case.ADVICE in text, text
    # raised `from None`: the user sees no internal exception "during handling" of another
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__), repr(error.__context__)


def _run(tool: str, *args: str, cwd: Path = CORPUS) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    command = [sys.executable, "-m", f"tinyton.cli.{tool}", *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def _check_failure(result: subprocess.CompletedProcess[str], prefix: str, *expected: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith(f"{prefix}: error: "), result.stderr
    for text in expected:
        assert text in result.stderr, result.stderr


OPT_CASES = {
    "unknown-pass": (
        ["mlir/program.mlir", "-p", "tinyton-fusee"],
        ["unknown pass 'tinyton-fusee' in -p; did you mean tinyton-fuse?"],
    ),
    "bad-option-value": (
        ["mlir/kernel.mlir", "-p", "tinyton-to-llvm{num_warps=many}"],
        ["bad option for pass tinyton-to-llvm", "tinyton-to-llvm takes num_warps"],
    ),
    "unknown-option": (
        ["mlir/program.mlir", "-p", "tinyton-fuse{aggressive=true}"],
        ["bad option for pass tinyton-fuse", "tinyton-fuse takes no options"],
    ),
    "malformed-pipeline": (
        ["mlir/kernel.mlir", "-p", "tinyton-to-llvm{num_warps=8"],
        ["cannot parse the pass pipeline", "write -p 'pass-a,pass-b{option=value}'"],
    ),
    "missing-file": (["mlir/no_such_file.mlir"], ["no such file: mlir/no_such_file.mlir"]),
    "directory": (["mlir"], ["mlir is a directory"]),
    "func-call": (
        ["mlir/call.mlir", "-p", "tinyton-fuse"],
        ["mlir/call.mlir:3:3: func.call: tinyton-fuse does not follow calls (to @helper); inline the callee"],
    ),
    "tt-to-fuse": (
        ["mlir/kernel.mlir", "-p", "tinyton-fuse"],
        ["mlir/kernel.mlir:4:5: tt.program_id: tinyton-fuse takes tta array programs", "-p tinyton-to-llvm"],
    ),
    "tt-to-fuse-patterns": (
        ["mlir/kernel.mlir", "-p", "tinyton-fuse-patterns"],
        ["mlir/kernel.mlir:4:5: tt.program_id: tinyton-fuse-patterns takes tta array programs"],
    ),
    "tt-to-fusion-to-kernels": (
        ["mlir/kernel.mlir", "-p", "tinyton-fusion-to-kernels"],
        ["mlir/kernel.mlir:4:5: tt.program_id: tinyton-fusion-to-kernels takes tta array programs"],
    ),
    "unfused-to-fusion-to-kernels": (
        ["mlir/program.mlir", "-p", "tinyton-fusion-to-kernels"],
        ["mlir/program.mlir:4:3: tta.mul: tinyton-fusion-to-kernels makes one kernel per tta.fusion region",
         "-p tinyton-fuse,tinyton-fusion-to-kernels"],
    ),
    "tta-to-llvm": (
        ["mlir/program.mlir", "-p", "tinyton-to-llvm"],
        ["mlir/program.mlir:3:3: tta.constant: tinyton-to-llvm takes tt kernels, but @scale is a tta array program",
         "-p tinyton-fuse,tinyton-fusion-to-kernels,tinyton-to-llvm"],
    ),
    "syntax-error": (["mlir/syntax_error.mlir"], ["mlir/syntax_error.mlir:4:3", "Expected '>'"]),
    "invalid-op": (
        ["mlir/invalid_op.mlir", "-p", "tinyton-fuse"],
        ["mlir/invalid_op.mlir:3:3: tta.add: operands could not be broadcast together with shapes (4,) (3,)"],
    ),
}


@pytest.mark.parametrize("case", OPT_CASES)
def test_opt_case(case: str) -> None:
    args, expected = OPT_CASES[case]
    _check_failure(_run("opt", *args), "tinyton-opt", *expected)


@pytest.mark.parametrize(
    ("content", "expected"),
    [(b"", "is empty; give a module of tt kernels or tta array programs"), (b"\x7fELF\x02\x01\xd0\xff", "is not an MLIR text file: byte 6 (0xd0)")],
    ids=["empty", "binary"],
)
def test_opt_unreadable_file(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "input.mlir"
    path.write_bytes(content)
    _check_failure(_run("opt", str(path), "-p", "tinyton-fuse"), "tinyton-opt", f"{path} {expected}")


def test_opt_pipeline_of_an_array_program_still_works() -> None:
    result = _run("opt", "mlir/program.mlir", "-p", "tinyton-fuse,tinyton-fusion-to-kernels,tinyton-to-llvm")
    assert result.returncode == 0, result.stderr
    assert "llvm.func @scale_0_elementwise" in result.stdout


COMPILE_CASES = {
    "define-without-value": (
        ["compile/two_kernels.py", "-k", "blocked", "-s", "*fp32,i32", "-D", "BLOCK"],
        ["-D BLOCK needs a name and a value: write -D BLOCK=VALUE"],
    ),
    "not-python": (["compile/kernel.txt", "-s", "*fp32"], ["compile/kernel.txt is not a Python file (.py)"]),
    "missing-file": (["compile/no_such_kernel.py", "-s", "*fp32"], ["no such file: compile/no_such_kernel.py"]),
    "kernel-name": (
        ["compile/two_kernels.py", "-k", "third", "-s", "*fp32"],
        ["has no @tt.jit kernel 'third' (its kernels: first, second, blocked); check the -k NAME"],
    ),
    "no-kernel-name": (
        ["compile/two_kernels.py", "-s", "*fp32"],
        ["defines 3 @tt.jit kernels (first, second, blocked); pick one with -k NAME"],
    ),
    "array-program": (
        ["compile/two_kernels.py", "-k", "doubled", "-s", "*fp32"],
        ["doubled is an array program (it returns a value), not a kernel", "tinyton graph"],
    ),
    "bad-signature-entry": (
        ["compile/two_kernels.py", "-k", "first", "-s", "*f32"],
        ["bad entry '*f32' in --signature '*f32'", "*fp32, *fp16, *i32, *i1 (arrays)"],
    ),
    "signature-length": (
        ["compile/two_kernels.py", "-k", "first", "-s", "*fp32,i32"],
        ["compile/two_kernels.py:7:1: --signature has 2 entries but first has 1 runtime parameters (out_ptr)"],
    ),
    "missing-constexpr": (
        ["compile/two_kernels.py", "-k", "blocked", "-s", "*fp32,i32"],
        ["compile/two_kernels.py:22:1: blocked needs a value for its constexpr parameter(s) BLOCK: -D BLOCK=VALUE"],
    ),
    "unknown-constexpr": (
        ["compile/two_kernels.py", "-k", "blocked", "-s", "*fp32,i32", "-D", "BLOCK=16", "-D", "WARPS=4"],
        ["-D WARPS: blocked has no constexpr parameter WARPS (its constexprs: BLOCK)"],
    ),
}


@pytest.mark.parametrize("case", COMPILE_CASES)
def test_compile_case(case: str) -> None:
    args, expected = COMPILE_CASES[case]
    _check_failure(_run("compile", "compile", *args), "tinyton", *expected)


def test_compile_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "kernel.py"
    path.write_bytes(b"\x7fELF\x02\x01\xd0\xff")
    _check_failure(_run("compile", "compile", str(path), "-s", "*fp32"), "tinyton", "is not Python source: byte 6 (0xd0)")


def test_compile_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "kernel.py"  # written here, not kept in the corpus: no tool should parse it as the project's
    path.write_text("import tinyton as tt\n\n\n@tt.jit\ndef broken(out_ptr):\n    tt.store(out_ptr, 1.0\n")
    _check_failure(_run("compile", "compile", str(path), "-s", "*fp32"), "tinyton", f"{path}:6:", "not valid Python")


def test_every_python_case_names_its_line() -> None:
    for path in PYTHON_CASES:
        if _load(path).ERROR is not None:
            assert _marked_line(path), path
