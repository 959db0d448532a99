"""`tinyton-opt`: xdsl-opt with tinyton's dialects and passes registered.

    tinyton-opt kernel.mlir -p tinyton-to-llvm
    tinyton-opt model.mlir -p tinyton-fuse,tinyton-fusion-to-kernels
"""

import sys

from xdsl.utils.exceptions import DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tinyton.dialects import tinyton_dialects
from tinyton.dialects.llvm_extra import load_llvm_extra
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


def main() -> None:
    """Run the driver; invalid input gets the parser's or verifier's message and exit code 1, not a traceback."""
    try:
        TinytonOptMain(description="tinyton optimizer driver").run()
    except (ParseError, DiagnosticException) as error:
        print(f"tinyton-opt: error: {error}", file=sys.stderr)
        for note in getattr(error, "__notes__", ()):
            print(note, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
