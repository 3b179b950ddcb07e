#!/usr/bin/env python
"""The course's benchmark: step cost and time to learn, side by side, on this machine, in one run.

    python benchmarks/bench.py [--preset auto] [--steps 4] [--learn-minutes 12] [--out benchmarks/results]

Step cost (:mod:`benchmarks.step_cost`) of TRL's defaults, the course's recipe and one change at a time to it
(:mod:`benchmarks.recipes`), generation alone (``generation_probe.py``), then time to learn notebook 01's task
(:mod:`benchmarks.time_to_learn`) for the course's recipe, TRL's defaults and the Hugging Face LLM course's.
Each measurement runs in its own process, so that its peak memory is its own; :mod:`benchmarks.report` writes
markdown, JSON and CSV. What each number means, and the targets: docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shlex
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from benchmarks import generation_probe, recipes, report, step_cost, time_to_learn  # noqa: E402


def in_own_process(func, *args):
    """``func(*args)`` in a new Python process, so that its peak memory and library state are its own."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=_quiet) as pool:
        return pool.submit(func, *args).result()  # an exception in the process is raised here, with its traceback


def _quiet() -> None:
    """Keep a measurement's warnings and progress bars out of the driver's output."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # open for the process's lifetime


def environment() -> dict:
    """The machine and the versions that decide the numbers."""
    from course_utils.hardware import detect_hardware, library_versions

    versions = library_versions()
    machine = f"{platform.machine()} {platform.system()}, {os.cpu_count()} CPUs, {detect_hardware().name}"
    return {"machine": machine, "python": platform.python_version(), **versions}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="auto", help="hardware preset the sizes come from (default: auto)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per step-cost run (after 1 warm-up)")
    parser.add_argument("--learn-minutes", type=float, default=12.0, help="training-time cap per time-to-learn run")
    parser.add_argument("--eval-every", type=int, default=2, help="steps between held-out evaluations")
    parser.add_argument("--skip-learn", action="store_true", help="no time-to-learn runs")
    parser.add_argument("--skip-levers", action="store_true", help="no per-lever step-cost runs")
    parser.add_argument("--lever", action="append", default=[], choices=list(recipes.LEVERS), metavar="NAME",
                        help="measure only this lever (repeatable; names: LEVERS in benchmarks/recipes.py)")
    parser.add_argument("--skip-probe", action="store_true", help="no generation probe (generation_probe.py)")
    parser.add_argument("--out", default=str(REPO_ROOT / "benchmarks" / "results"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the measurements load the local model
    out, options = Path(args.out), shlex.join(argv if argv is not None else sys.argv[1:])
    command = f"python benchmarks/bench.py {options or '(default options)'}"
    run = {"started": time.strftime("%Y-%m-%d %H:%M"), "command": command, "environment": environment(),
           "step_cost": [], "levers": [], "generation_probe": [], "time_to_learn": []}  # fmt: skip

    def measure(table: str, label: str, func, *func_args) -> None:
        print(f"  {label}", flush=True)
        run[table].append(in_own_process(func, *func_args))

    print(f"step cost ({args.steps} timed steps per recipe)")
    for recipe in ("trl-defaults", "course"):
        measure("step_cost", recipe, step_cost.measure, recipe, args.preset, args.steps, str(out / "tmp" / recipe))
    if not args.skip_levers:
        from course_utils.hardware import detect_hardware

        names = [n for n in recipes.applicable_levers(detect_hardware()) if not args.lever or n in args.lever]
        print(f"levers ({len(names)}, one change at a time to the course recipe)")
        for lever in (n for n in args.lever if n not in names):  # bf16 levers on a CPU without native bf16
            print(f"  {lever}: not measured, it changes nothing here (recipes.applicable_levers)")
        for i, lever in enumerate(names):
            tmp = str(out / "tmp" / f"lever-{i}")
            measure("levers", lever, step_cost.measure, "course", args.preset, args.steps, tmp, lever)
    if not args.skip_probe:
        print("generation alone (benchmarks/generation_probe.py)", flush=True)
        run["generation_probe"] = in_own_process(generation_probe.table)
    if not args.skip_learn:
        print(f"time to learn (cap {args.learn_minutes} min of training per recipe)")
        for recipe in ("course", "trl-defaults", "hf-course"):
            tmp = str(out / "tmp" / f"learn-{recipe}")
            measure("time_to_learn", recipe, time_to_learn.measure, recipe, args.preset, args.learn_minutes,
                    args.eval_every, tmp)  # fmt: skip
    print(report.write(out, run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
