"""Run the examples in one process at the sizes the simulator runs them (`--small`), for bench/sanitize.py:
under compute-sanitizer a process start costs more than most examples.

    python bench/run_examples.py                  # every examples/*.py
    python bench/run_examples.py softmax matmul   # these only
    python bench/run_examples.py microgpt         # examples/microgpt: train.py (2 steps), then sample.py (2 names)
"""

from __future__ import annotations

import runpy
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MICROGPT = EXAMPLES / "microgpt"


def run(script: Path, *argv: str) -> None:
    """`python script argv...`, in this process."""
    print(f"== {script.relative_to(EXAMPLES.parent)} {' '.join(argv)}", flush=True)
    sys.argv = [str(script), *argv]
    runpy.run_path(str(script), run_name="__main__")


def microgpt() -> None:
    sys.path.insert(0, str(MICROGPT))  # its scripts import each other, as when run from their folder
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = str(Path(folder) / "microgpt.npz")
        run(MICROGPT / "train.py", "--steps", "2", "--checkpoint", checkpoint)
        run(MICROGPT / "sample.py", "--num", "2", "--checkpoint", checkpoint)


def main(names: list[str]) -> None:
    scripts = {path.stem: path for path in sorted(EXAMPLES.glob("*.py"))}
    unknown = set(names) - set(scripts) - {"microgpt"}
    if unknown:
        sys.exit(f"no example {', '.join(sorted(unknown))}; examples: {', '.join([*scripts, 'microgpt'])}")
    for name in names or list(scripts):
        if name == "microgpt":
            microgpt()
        else:
            run(scripts[name], "--small")


if __name__ == "__main__":
    main(sys.argv[1:])
