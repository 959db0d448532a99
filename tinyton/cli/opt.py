"""`tinyton-opt`: xdsl-opt with tinyton's dialects and passes registered.

    tinyton-opt kernel.mlir -p tinyton-to-llvm
    tinyton-opt model.mlir -p tinyton-fuse,tinyton-fusion-to-kernels

Every bad input (a missing, empty or binary file, an unknown pass or option, IR a pass does not take)
is one `tinyton-opt: error: ...` message and exit code 1, never a Python traceback.
"""

import sys
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tinyton.cli.opt_input import (
    LocatingParser,
    UsageError,
    check_input_file,
    check_pipeline,
    decode_input,
    verify_located,
)
from tinyton.dialects import tinyton_dialects
from tinyton.dialects.llvm_extra import load_llvm_extra
from tinyton.errors import CompilationError
from tinyton.passes import ALL_PASSES


class TinytonOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in tinyton_dialects().items():
            # xDSL's entry point may already have registered them through TINYTON_UNIVERSE.
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)
        load_llvm_extra(self.ctx)  # llvm ops xDSL lacks (llvm.fptosi, ...), printed in generic form

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in ALL_PASSES.items():
            if name not in self.available_passes:
                self.register_pass(name, factory)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["mlir"] = self._parse_mlir

    def setup_pipeline(self) -> None:
        check_pipeline(self.args.passes, self.available_passes)
        super().setup_pipeline()

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        """The input file (`-` or none: stdin); any extension is read as MLIR, as mlir-opt does."""
        if self.args.input_file == "-":
            self.args.input_file = None
        check_input_file(self.args.input_file)
        stream, extension = super().get_input_stream()
        return stream, extension if extension in self.available_frontends else "mlir"

    def _parse_mlir(self, io: IO[bytes]) -> ModuleOp:
        name = self.get_input_name()
        parser = LocatingParser(self.ctx, decode_input(io.read(), name), name)
        module = parser.parse_module(not self.args.no_implicit_module)
        if not (self.args.disable_verify or self.args.verify_diagnostics):  # the latter wants xDSL's own output
            verify_located(module)
        return module


def main() -> None:
    """Run the driver; invalid input gets one error message and exit code 1, not a traceback."""
    try:
        TinytonOptMain(description="tinyton optimizer driver").run()
    except (UsageError, CompilationError) as error:
        print(f"tinyton-opt: error: {error}", file=sys.stderr)
        sys.exit(1)
    except (ParseError, DiagnosticException) as error:
        print(f"tinyton-opt: error: {error}", file=sys.stderr)
        for note in getattr(error, "__notes__", ()):
            print(note, file=sys.stderr)
        sys.exit(1)
    except OSError as error:  # unwritable -o file, a full disk, a closed pipe
        print(f"tinyton-opt: error: {error.strerror or error}: {error.filename or ''}".rstrip(": "), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
