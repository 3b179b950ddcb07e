#!/usr/bin/env python
"""Run every course notebook headless and summarise what each one measured.

    python scripts/run_course.py [--preset cpu-ci] [notebooks/01_first_grpo_run.ipynb ...]

Writes the executed notebooks, each notebook's results JSON and ``summary.md`` / ``summary.json``
under ``runs/<timestamp>/``. Exits 1 if any notebook errors or fails its learning checks.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "scripts"))  # notebook_runner.py, when loaded from elsewhere

from notebook_runner import NotebookRun, course_notebooks, execute_notebook, new_record_folder  # noqa: E402


def _last_line(text: str | None) -> str:
    lines = [line for line in (text or "").strip().splitlines() if line.strip()]
    return (lines[-1] if lines else "").replace("|", "/")[:200]


def summarise(runs: list[NotebookRun], preset: str) -> str:
    lines = [
        f"# Course run {time.strftime('%Y-%m-%d %H:%M')}, preset `{preset}`",
        "",
        "| notebook | status | runtime | peak memory | measured | checks |",
        "|---|---|---|---|---|---|",
    ]
    for run in runs:
        metrics = (run.record or {}).get("metrics", {})
        shown = ", ".join(f"{k}={v}" for k, v in metrics.items() if not k.endswith("seconds"))
        claims = {**(run.record or {}).get("checks", {}), **(run.record or {}).get("guards", {})}
        checks = "; ".join(f"{'PASS' if ok else 'FAIL'}: {c}" for c, ok in claims.items())
        outcome = checks or _last_line(run.error)
        peak = (run.record or {}).get("peak_memory_mb")
        memory = f"{peak / 1000:.1f} GB" if peak else "-"  # the kernel's peak RSS (course_utils.results)
        lines.append(f"| {run.notebook} | {run.status} | {run.seconds / 60:.1f} min | {memory} | {shown} | {outcome} |")
    total = sum(r.seconds for r in runs)
    lines += ["", f"Total: {total / 60:.1f} min; {sum(r.passed for r in runs)}/{len(runs)} notebooks passed."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/NN_*.ipynb")
    parser.add_argument("--preset", default="auto", help="auto (default), cpu-ci, cpu, t4 or gpu")
    parser.add_argument("--seed", type=int, default=None, help="default: each notebook's own seed parameter")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default runs/<timestamp>)")
    args = parser.parse_args()

    notebooks = [p.resolve() for p in args.notebooks] or course_notebooks()
    out = new_record_folder(args.out, REPO_ROOT / "runs" / time.strftime("%Y%m%d-%H%M%S"))  # never an earlier run's
    runs = []
    for path in notebooks:
        print(f"running {path.name} (preset {args.preset}) ...", flush=True)
        parameters = {"preset": args.preset} | ({"seed": args.seed} if args.seed is not None else {})
        run = execute_notebook(path, out, parameters)
        print(f"  {run.status} in {run.seconds / 60:.1f} min", flush=True)
        if run.error:
            print("  " + _last_line(run.error), flush=True)
        runs.append(run)
    summary = summarise(runs, args.preset)
    (out / "summary.md").write_text(summary)
    (out / "summary.json").write_text(
        json.dumps(
            [
                {
                    "notebook": r.notebook,
                    "status": r.status,
                    "seconds": round(r.seconds, 1),
                    "error": r.error,
                    "record": r.record,
                }
                for r in runs
            ],
            indent=2,
        )  # fmt: skip
    )
    print("\n" + summary)
    print(f"Executed notebooks and results: {out}")
    return 0 if all(r.passed for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
