"""The regression guard: run the benchmarks on this GPU and hold every tinyton figure against the last recorded one.

    python bench/regress.py                       # bench_kernels + bench_fusion, compared with bench/baselines/<gpu>.json
    python bench/regress.py bench_matmul.py       # other scripts
    python bench/regress.py --update              # record this run as the GPU's baseline
    python bench/regress.py --from-markdown out.md --update   # record tables a run already printed

Each benchmark prints Markdown tables (`### title` then `| ... |` rows); the guard parses them, keeps the cells
of columns named "tinyton..." (the anchors' own columns move with the machine, not with our code), and flags
every figure more than 10 % worse than its baseline. Lower is better for times (titles or columns in µs or
ms), higher for rates (GB/s, TFLOPS). Exits 1 when something dropped, so it can gate a change.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINES = HERE / "baselines"
DEFAULT_SCRIPTS = ("bench_kernels.py", "bench_fusion.py")
TOLERANCE = 0.10
NUMBER = re.compile(r"-?\d+(\.\d+)?")

Figures = dict[str, float]
"""`"table title | row | column"` -> value."""


def parse_tables(text: str) -> Figures:
    """The tinyton figures of every Markdown table in a benchmark's output."""
    figures: Figures = {}
    title, header = "", []
    for line in text.splitlines():
        if line.startswith("### "):
            title, header = line[4:].strip(), []
        elif line.startswith("|") and not set(line) <= set("|-: "):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not header:
                header = cells
                continue
            lead = []  # the row's name: its cells before the first number (e.g. dtype and shape)
            for cell in cells:
                if NUMBER.fullmatch(cell):
                    break
                lead.append(cell)
            row = " ".join(lead) or cells[0]
            for column, cell in zip(header[1:], cells[1:]):
                number = NUMBER.fullmatch(cell)
                tinyton_row = column in ("µs", "GB/s") and cells[0].startswith("tinyton")
                if number and (column.startswith("tinyton") or tinyton_row):
                    figures[f"{title} | {row} | {column}"] = float(cell)
    return figures


def lower_is_better(key: str) -> bool:
    """Times (µs, ms) shrink when we get faster; rates (GB/s, TFLOPS) grow. The most specific unit decides:
    the row's (tables with a unit column), then the column's, then the title's."""
    title, row, column = key.split(" | ")
    for part in (row, column, title):
        rate, time = ("GB/s" in part or "TFLOPS" in part), ("µs" in part or "(ms)" in part)
        if rate != time:
            return time
    return False


def gpu_slug() -> str:
    import torch

    return re.sub(r"\W+", "-", torch.cuda.get_device_name()).strip("-").lower()


def run_scripts(scripts: list[str]) -> str:
    out = []
    for script in scripts:
        print(f"running {script} ...", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, script], cwd=HERE, capture_output=True, text=True, check=False)
        if done.returncode:
            print(done.stderr[-2000:], file=sys.stderr)
        out.append(done.stdout)
    return "\n".join(out)


def compare(now: Figures, recorded: Figures) -> tuple[list[list[str]], int]:
    rows, drops = [], 0
    for key in sorted(now.keys() & recorded.keys()):
        before, after = recorded[key], now[key]
        change = (before - after) / before if lower_is_better(key) else (after - before) / before
        flag = "DROP" if change < -TOLERANCE else ""
        drops += bool(flag)
        rows.append([key, f"{before:g}", f"{after:g}", f"{100 * change:+.1f}%", flag])
    return rows, drops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scripts", nargs="*", default=list(DEFAULT_SCRIPTS))
    parser.add_argument("--update", action="store_true", help="record this run as the baseline")
    parser.add_argument("--from-markdown", type=Path, help="parse this file instead of running the scripts")
    parser.add_argument("--gpu", help="baseline name (default: this GPU's name)")
    args = parser.parse_args(argv)
    text = args.from_markdown.read_text() if args.from_markdown else run_scripts(args.scripts)
    now = parse_tables(text)
    path = BASELINES / f"{args.gpu or gpu_slug()}.json"
    recorded = json.loads(path.read_text())["figures"] if path.exists() else {}
    rows, drops = compare(now, recorded)
    print("| figure | recorded | now | change | |\n|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    new = sorted(now.keys() - recorded.keys())
    if new:
        print(f"\n{len(new)} figures without a baseline: {', '.join(new[:5])}{' ...' if len(new) > 5 else ''}")
    if args.update:
        BASELINES.mkdir(exist_ok=True)
        path.write_text(json.dumps({"figures": {**recorded, **now}}, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
        print(f"\nrecorded {len(now)} figures in {path.relative_to(HERE.parent)}")
    print(f"\n{drops} figure(s) dropped by more than {100 * TOLERANCE:.0f} %" if recorded else "\nno baseline yet")
    return 1 if drops and not args.update else 0


if __name__ == "__main__":
    sys.exit(main())
