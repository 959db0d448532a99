"""A lockstep SIMT interpreter of the llvm + nvvm dialect kernels tinyton's lowering emits: one program of
straight-line code (no branches), every thread of the program at once, each SSA value a NumPy array over
the threads. It checks a lowering's arithmetic, shuffles and shared-memory rounds against NumPy without a
GPU (tests/test_lowering_simt.py). Barriers are no-ops (the threads run in lockstep, so a missing barrier
goes unseen: ptxas and the GPU tests cover those); inline asm runs the PTX tinyton's memory ops emit
(`mov`, `ld.global`, `st.global`, `red.shared.add.u32`, optionally predicated). Anything else raises.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    AnyFloat,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    ModuleOp,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.parser import Parser

from tinyton.dialects import tinyton_context

FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}
SHARED_BYTES = 1 << 18
ICMP = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
    "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b,
}
ICMP_NAMES = ["eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge"]
FCMP_NAMES = ["false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord", "ueq", "ugt", "uge", "ult", "ule", "une", "uno",
              "true"]


def _width(t: Attribute) -> int:
    return t.bitwidth if isinstance(t, IntegerType | AnyFloat) else 64


def _wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Integers are held as uint64 bit patterns of their width."""
    x = np.asarray(x).astype(np.uint64)
    return x if bits == 64 else x & np.uint64((1 << bits) - 1)


def _signed(x: np.ndarray, bits: int) -> np.ndarray:
    x = _wrap(x, bits).astype(np.int64)
    return x if bits == 64 else np.where(x >= 1 << (bits - 1), x - (1 << bits), x)


def _bytes(t: Attribute) -> int:
    return max(1, _width(t) // 8)


class Memory:
    """Global memory (host arrays at distinct bases) and the program's shared memory, as bytes."""

    def __init__(self, arrays: list[np.ndarray]):
        self.bases, base = [], 1 << 20
        for a in arrays:
            self.bases.append(base)
            base += -(-a.nbytes // 256) * 256 + 256
        self.global_bytes = np.zeros(base, np.uint8)
        for a, b in zip(arrays, self.bases):
            self.global_bytes[b : b + a.nbytes] = np.ascontiguousarray(a).view(np.uint8).ravel()
        self.shared = np.zeros(SHARED_BYTES, np.uint8)

    def space(self, t: Attribute) -> np.ndarray:
        return self.shared if getattr(t, "addr_space", None) is not None and t.addr_space.data == 3 else self.global_bytes

    def load(self, buf: np.ndarray, address: np.ndarray, t: Attribute) -> np.ndarray:
        n = _bytes(t)
        raw = buf[address.astype(np.int64)[:, None] + np.arange(n)].copy()
        if isinstance(t, AnyFloat):
            return raw.view(FLOATS[t.bitwidth]).ravel()
        if _width(t) == 1:
            return raw[:, 0] & 1
        return _wrap(raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[n]).ravel(), _width(t))

    def store(self, buf: np.ndarray, address: np.ndarray, value: np.ndarray, t: Attribute, active: np.ndarray) -> None:
        n = _bytes(t)
        if isinstance(t, AnyFloat):
            raw = np.asarray(value, FLOATS[t.bitwidth]).view(np.uint8).reshape(-1, n)
        else:
            raw = _wrap(value, 64).astype({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[n]).view(np.uint8)
            raw = raw.reshape(-1, n)
        for thread in np.flatnonzero(active):  # in thread order: the last writer wins, as one serialisation
            buf[int(address[thread]) : int(address[thread]) + n] = raw[thread]

    def read_back(self, arrays: list[np.ndarray]) -> None:
        for a, b in zip(arrays, self.bases):
            a.reshape(-1).view(np.uint8)[:] = self.global_bytes[b : b + a.nbytes]


class Program:
    """One program (`pid` (0, 0, 0)) of an llvm-dialect kernel, run over its `threads` threads."""

    def __init__(self, llvm_text: str, threads: int):
        module = Parser(tinyton_context(), llvm_text).parse_module()
        assert isinstance(module, ModuleOp)
        self.func = next(op for op in module.ops if isinstance(op, llvm.FuncOp) and op.body.blocks)
        self.threads = threads
        self.values: dict[SSAValue, Any] = {}

    def run(self, args: list[Any]) -> None:
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        memory = Memory(arrays)
        block = self.func.body.blocks[0]
        if len(self.func.body.blocks) != 1:
            raise NotImplementedError("the SIMT interpreter runs straight-line kernels only")
        bases = iter(memory.bases)
        for param, value in zip(block.args, args):
            self.values[param] = np.full(self.threads, next(bases) if isinstance(value, np.ndarray) else value, np.uint64)
        self.memory = memory
        for op in block.ops:
            self.step(op)
        memory.read_back(arrays)

    def get(self, v: SSAValue) -> Any:
        return self.values[v]

    def set(self, op: Any, value: Any) -> None:
        self.values[op.results[0]] = value

    def step(self, op: Any) -> None:
        name, t = op.name, op.results[0].type if op.results else None
        operands = [self.get(v) for v in op.operands]
        if name == "llvm.mlir.constant":
            attr = op.value
            value = attr.value.data
            self.set(op, np.full(self.threads, value, FLOATS[t.bitwidth]) if isinstance(attr, FloatAttr)
                     else _wrap(np.full(self.threads, int(value), np.int64), _width(t)) if isinstance(attr, IntegerAttr)
                     else None)
        elif name.startswith("nvvm.read.ptx.sreg."):
            special = name.rsplit(".", 2)[-2:]
            self.set(op, np.arange(self.threads, dtype=np.uint64) if special == ["tid", "x"] else np.zeros(self.threads, np.uint64))
        elif name in ("llvm.add", "llvm.sub", "llvm.mul", "llvm.and", "llvm.or", "llvm.xor", "llvm.shl", "llvm.lshr"):
            a, b = operands
            fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "and": np.bitwise_and, "or": np.bitwise_or,
                  "xor": np.bitwise_xor, "shl": np.left_shift, "lshr": np.right_shift}[name[5:]]
            with np.errstate(over="ignore"):
                self.set(op, _wrap(fn(a.astype(np.uint64), b.astype(np.uint64)), _width(t)))
        elif name in ("llvm.sdiv", "llvm.srem", "llvm.udiv", "llvm.urem"):
            bits = _width(t)
            a, b = (_signed(x, bits) if name[5] == "s" else _wrap(x, bits).astype(np.int64) for x in operands)
            quotient = np.trunc(a / np.where(b == 0, 1, b)).astype(np.int64)  # C's: toward zero
            self.set(op, _wrap(quotient if name.endswith("div") else a - quotient * b, bits))
        elif name == "llvm.call_intrinsic":
            intrinsic = op.intrin.data.split(".")[1]
            fns = {"maximum": np.maximum, "minimum": np.minimum, "maxnum": np.fmax, "minnum": np.fmin}
            if intrinsic not in fns:
                raise NotImplementedError(f"the SIMT interpreter cannot run {op.intrin.data}")
            self.set(op, fns[intrinsic](*operands))
        elif name == "llvm.ashr":
            a, b = operands
            self.set(op, _wrap(_signed(a, _width(t)) >> b.astype(np.int64), _width(t)))
        elif name in ("llvm.fadd", "llvm.fsub", "llvm.fmul", "llvm.fdiv"):
            a, b = operands
            self.set(op, {"fadd": np.add, "fsub": np.subtract, "fmul": np.multiply, "fdiv": np.divide}[name[5:]](a, b))
        elif name == "llvm.icmp":
            pred, bits = ICMP_NAMES[op.predicate.value.data], _width(op.operands[0].type)
            a, b = (_signed(x, bits) if pred[0] == "s" else _wrap(x, bits) for x in operands)
            self.set(op, ICMP[pred](a, b).astype(np.uint64))
        elif name == "llvm.fcmp":
            pred = FCMP_NAMES[op.predicate.value.data]
            a, b = operands
            with np.errstate(invalid="ignore"):
                base = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b, "ne": a != b}.get(pred[1:])
                unordered = np.isnan(a) | np.isnan(b)
                result = {"ord": ~unordered, "uno": unordered}.get(pred)
                if result is None:
                    result = (base & ~unordered) if pred[0] == "o" else (base | unordered)
            self.set(op, result.astype(np.uint64))
        elif name == "llvm.select":
            c, a, b = operands
            self.set(op, np.where(c.astype(bool), a, b))
        elif name in ("llvm.zext", "llvm.trunc", "llvm.ptrtoint", "llvm.inttoptr"):
            self.set(op, _wrap(operands[0], _width(t)))
        elif name == "llvm.sext":
            self.set(op, _wrap(_signed(operands[0], _width(op.operands[0].type)), _width(t)))
        elif name == "llvm.bitcast":
            src = op.operands[0].type
            x = operands[0]
            if isinstance(t, AnyFloat) and not isinstance(src, AnyFloat):
                ints = {16: np.uint16, 32: np.uint32, 64: np.uint64}[t.bitwidth]
                self.set(op, x.astype(ints).view(FLOATS[t.bitwidth]))
            elif isinstance(src, AnyFloat) and not isinstance(t, AnyFloat):
                ints = {16: np.uint16, 32: np.uint32, 64: np.uint64}[src.bitwidth]
                self.set(op, np.asarray(x, FLOATS[src.bitwidth]).view(ints).astype(np.uint64))
            else:
                self.set(op, x)
        elif name == "llvm.getelementptr":
            size = _bytes(op.elem_type)
            dynamic = iter(operands[1:])
            offset = np.zeros(self.threads, np.int64)
            for index in op.rawConstantIndices.get_values():
                value = _signed(next(dynamic), _width(op.operands[1].type)) if index == llvm.GEP_USE_SSA_VAL else index
                offset = offset + np.asarray(value, np.int64) * size
            self.set(op, _wrap(operands[0].astype(np.int64) + offset, 64))
        elif name == "llvm.mlir.addressof":
            self.set(op, np.zeros(self.threads, np.uint64))
        elif name == "llvm.load":
            self.set(op, self.memory.load(self.memory.space(op.operands[0].type), operands[0], t))
        elif name == "llvm.store":
            value, ptr = operands
            buf = self.memory.space(op.operands[1].type)
            self.memory.store(buf, ptr, value, op.operands[0].type, np.ones(self.threads, bool))
        elif name == "nvvm.shfl.sync":
            _, value, offset, _ = operands
            lane = np.arange(self.threads)
            kind = op.kind.data.value if hasattr(op.kind.data, "value") else str(op.kind.data)
            if "bfly" not in str(kind):
                raise NotImplementedError(f"shfl {kind}")
            source = (lane & ~31) | ((lane & 31) ^ offset.astype(np.int64))
            self.set(op, value[source])
        elif name == "llvm.extractvalue":
            self.set(op, operands[0][op.position.get_values()[0]])
        elif name == "llvm.inline_asm":
            self.inline_asm(op, operands)
        elif name in ("nvvm.barrier0", "llvm.return", "llvm.mlir.global"):
            pass
        else:
            raise NotImplementedError(f"the SIMT interpreter cannot run {name}")

    def inline_asm(self, op: Any, operands: list[Any]) -> None:
        """The PTX of tinyton's memory ops; `$i` are the results, then the operands."""
        results = op.res.type.types.data if op.res is not None and isinstance(op.res.type, llvm.LLVMStructType) else (
            [op.res.type] if op.res is not None else [])
        regs: list[Any] = [None] * len(results) + operands
        types: list[Attribute] = [*results, *(v.type for v in op.operands)]
        for text in op.asm_string.data.replace("\n", " ").split(";"):
            text = text.strip()
            if not text:
                continue
            active = np.ones(self.threads, bool)
            if m := re.match(r"@(!?)\$(\d+)\s+(.*)", text):
                flag = regs[int(m[2])].astype(bool)
                active, text = (~flag if m[1] else flag), m[3]
            opcode, _, rest = text.partition(" ")
            numbers = [int(n) for n in re.findall(r"\$(\d+)", rest)]
            if opcode.startswith("mov"):
                out, src = numbers[0], rest.split(",", 1)[1].strip()
                value = regs[numbers[1]] if src.startswith("$") else np.full(self.threads, int(src, 0), np.uint64)
                regs[out] = value if regs[out] is None else np.where(active, value, regs[out])
            elif opcode.startswith("ld.global"):
                *outs, address = numbers
                for k, out in enumerate(outs):
                    value = self.memory.load(self.memory.global_bytes, regs[address] + np.uint64(k * _bytes(types[out])), types[out])
                    regs[out] = value if regs[out] is None else np.where(active, value, regs[out])
            elif opcode.startswith("st.global"):
                address, *values = numbers
                for k, v in enumerate(values):
                    at = regs[address] + np.uint64(k * _bytes(types[v]))
                    self.memory.store(self.memory.global_bytes, at, regs[v], types[v], active)
            elif opcode in ("griddepcontrol.wait", "griddepcontrol.launch_dependents"):
                pass  # one launch at a time here: the launch before has completed, the next starts after
            elif opcode == "red.shared.add.u32":
                address = regs[numbers[0]].astype(np.int64)
                counts = self.memory.shared.view(np.uint32)
                np.add.at(counts, address[active] // 4, np.uint32(int(rest.rsplit(",", 1)[1])))
            else:
                raise NotImplementedError(f"the SIMT interpreter cannot run the PTX `{text}`")
        if op.res is not None:
            outs = regs[: len(results)]
            self.set(op, tuple(outs) if isinstance(op.res.type, llvm.LLVMStructType) else outs[0])


def run_program(compiled: Any, args: list[Any]) -> None:
    """Run program 0 of a `CompiledKernel` on `args` (NumPy arrays updated in place, numbers)."""
    Program(compiled.asm["llvm-mlir"], 32 * compiled.num_warps).run(args)
