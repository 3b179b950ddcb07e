"""A notebook's learning record: what it measured and which checks passed.

Each notebook ends by calling :func:`record_results`. It prints a small table for the learner and,
when the course runner sets ``COURSE_RESULTS_DIR``, writes ``<notebook>.json`` there so that
``make course`` and the tests can summarise every run. The notebook then asserts its checks itself,
in plain sight.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from course_utils.presets import cpu_precision_chosen

RESULTS_ENV = "COURSE_RESULTS_DIR"


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        # six significant digits: readable, and a tolerance check's 3e-06 is not rounded to 0.0
        return float(f"{value:.6g}") if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return _plain(vars(value))
    return value


def peak_memory_mb() -> float | None:
    """The peak resident memory so far of this process or of a finished child (notebook 09 trains in one), in MB.

    None where the OS does not report it (Windows). Example: ``peak_memory_mb()`` -> ``5731.4`` after a
    notebook's GRPO run on a CPU. On Linux this process's own peak is ``VmHWM``: ``getrusage`` would report the
    parent's memory instead when that was larger at the fork that started this process (a notebook kernel
    started by a pytest process that holds a model).
    """
    try:
        import resource
    except ImportError:
        return None
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB on Linux, bytes on macOS
    try:
        with open("/proc/self/status") as status:
            own = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))  # kB
    except (OSError, StopIteration, ValueError):
        pass
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # at most our own size at their fork
    return round(max(own, children) / (1e6 if sys.platform == "darwin" else 1e3), 1)


def record_results(
    notebook: str,
    metrics: dict[str, Any],
    checks: dict[str, bool],
    guards: dict[str, bool] | None = None,
    **context: Any,
) -> dict:
    """Print and (under the course runner) save the run's measured numbers and check outcomes.

    Args:
        notebook: the notebook's id, e.g. ``"01_first_grpo_run"``.
        metrics: numbers measured in this run (before/after values, runtimes).
        checks: the learning claims, in plain language, mapped to whether this run's numbers satisfy them.
            Each must FAIL when GRPO's learning rate is 0: ``make prove`` runs the notebook that way and
            reports any learning check that still passes as a defect.
        guards: claims that must pass but prove no learning: a mechanism (a merge is exact, a failure
            demonstration failed) or a level the trained model must reach (its answers stay distinct and end
            on their own), which the base model may fall short of, so a guard may fail at learning rate 0 too.
        context: anything else worth keeping (preset, model, seed, learning rate).

    Returns the record; ``record["passed"]`` is True when every check and every guard passed. It also keeps the
    kernel's peak memory (``peak_memory_mb``), which decides how many notebooks a machine can run side by side.
    """
    guards = guards or {}
    record = {
        "notebook": notebook,
        "passed": all(bool(v) for v in [*checks.values(), *guards.values()]),
        "checks": {k: bool(v) for k, v in checks.items()},
        "guards": {k: bool(v) for k, v in guards.items()},
        "metrics": _plain(metrics),
        **_plain(context),
        "cpu_precision": cpu_precision_chosen(),  # None unless the notebook let the CPU choose (10-12)
        "peak_memory_mb": peak_memory_mb(),
    }
    width = max(len(k) for k in metrics) + 2 if metrics else 0
    print("Measured in this run")
    for key, value in record["metrics"].items():
        print(f"  {key:<{width}} {value}")
    print("Learning checks (each must fail when GRPO's learning rate is 0)")
    for claim, ok in record["checks"].items():
        print(f"  [{'PASS' if ok else 'FAIL'}] {claim}")
    if guards:
        print("Guards (must hold; they prove no learning)")
        for claim, ok in record["guards"].items():
            print(f"  [{'PASS' if ok else 'FAIL'}] {claim}")
    out_dir = os.environ.get(RESULTS_ENV)
    if out_dir:
        path = Path(out_dir) / f"{notebook}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=2))
    return record
