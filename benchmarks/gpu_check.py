#!/usr/bin/env python
"""make gpu-check: every notebook with the t4 preset (fp16) and the gpu preset (float32), on a CUDA GPU.

    python benchmarks/gpu_check.py [--presets t4 gpu] [notebooks/01_first_grpo_run.ipynb ...]
    python benchmarks/gpu_check.py --refuse-without-gpu    # the check alone, standard library only

Each preset runs through ``scripts/run_course.py --preset <preset>`` (what ``make course`` runs) into
``runs/<time>-gpu-check-<preset>/``. The notebooks that pass are added to ``benchmarks/results/runtimes.json``
the way ``make runtimes`` adds a ``make course`` run (``benchmarks/runtimes.py``), with the GPU's name as the
machine and each notebook's learning numbers (its metrics and checks) beside its minutes; the README's T4 and
Ampere+ columns are then rewritten from the record. A notebook that errors or does not learn is reported and
not recorded, and the exit status is 1.

On a machine without a CUDA GPU it refuses before doing any work. The gpu preset needs bfloat16 (Ampere or
newer): on a GPU without it (a T4) that preset is skipped, with the reason.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[1]
PRESETS = ("t4", "gpu")
NO_GPU = "make gpu-check needs a CUDA GPU; this machine has none"


def _load_runtimes() -> ModuleType:
    spec = importlib.util.spec_from_file_location("runtimes", Path(__file__).with_name("runtimes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rt = _load_runtimes()  # benchmarks/runtimes.py: the record and the README table


class Gpu(NamedTuple):
    """What torch sees: ``available`` is torch.cuda.is_available(); ``cuda`` is torch.version.cuda."""

    available: bool
    name: str
    bf16: bool
    torch_version: str
    cuda: str | None


def detect_gpu() -> Gpu:
    import torch

    if not torch.cuda.is_available():
        return Gpu(False, "", False, torch.__version__, torch.version.cuda)
    bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    return Gpu(True, torch.cuda.get_device_name(0), bf16, torch.__version__, torch.version.cuda)


def refusal(gpu: Gpu | None, has_nvidia_smi: bool) -> str | None:
    """Why this machine cannot run the check (one line with the fix), or None when it can.

    ``gpu`` None means torch was not consulted (the check before ``make setup``: nvidia-smi only).
    """
    if not has_nvidia_smi and (gpu is None or not gpu.available):
        return f"{NO_GPU} (no nvidia-smi, no CUDA device). Run it where an NVIDIA GPU is: Colab's T4, or Ampere+."
    if gpu is None or gpu.available:
        return None
    if gpu.cuda is None:
        release = gpu.torch_version.split("+")[0]
        return (
            f"{NO_GPU} that torch can use: torch {gpu.torch_version} is a CPU build, but nvidia-smi is here. "
            f'Install the CUDA build (pip install --force-reinstall "torch=={release}"), then make gpu-check again'
        )
    return f"{NO_GPU} that torch can use: torch {gpu.torch_version} (CUDA {gpu.cuda}) sees no device; check nvidia-smi"


def presets_to_run(requested: list[str], gpu: Gpu) -> tuple[list[str], list[str]]:
    """The presets this GPU can run, and a note for each one skipped."""
    unknown = [p for p in requested if p not in PRESETS]
    if unknown:
        raise SystemExit(f"--presets {' '.join(unknown)}: make gpu-check runs {' and '.join(PRESETS)} only")
    runnable, notes = [], []
    for preset in requested:
        if preset == "gpu" and not gpu.bf16:
            notes.append(f"skipping preset gpu: it is sized for Ampere or newer, and {gpu.name} has no bfloat16")
        else:
            runnable.append(preset)
    if "t4" in runnable and "T4" not in gpu.name:
        notes.append(f"the t4 preset runs on {gpu.name}, not a T4: its record names this machine")
    return runnable, notes


def course_command(preset: str, out: Path, notebooks: list[str]) -> list[str]:
    """What ``make course PRESET=<preset>`` runs, into ``out``."""
    script = str(REPO_ROOT / "scripts" / "run_course.py")
    return [sys.executable, script, "--preset", preset, "--out", str(out), *notebooks]


def record_run(record: dict, summary: Path, machine: str, date: str | None = None) -> int:
    """Add a run's passing notebooks as ``make runtimes`` does, plus their metrics and checks."""
    before = len(record["measurements"])
    added = rt.add_summary(record, summary, date=date, host=machine)
    runs = {run["notebook"]: run for run in json.loads(summary.read_text())}
    for measurement in record["measurements"][before:]:
        result = runs[measurement["notebook"]]["record"]
        measurement["source"] = f"make gpu-check ({summary.parent.name})"
        measurement["metrics"] = result.get("metrics", {})
        measurement["checks"] = result.get("checks", {})
    return added


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="*", help="default: every notebooks/NN_*.ipynb")
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), help="t4, gpu or both (default)")
    parser.add_argument("--refuse-without-gpu", action="store_true", help="only check for nvidia-smi (no torch)")
    args = parser.parse_args(argv)
    has_nvidia_smi = shutil.which("nvidia-smi") is not None
    if args.refuse_without_gpu:
        problem = refusal(None, has_nvidia_smi)
    else:
        gpu = detect_gpu()
        problem = refusal(gpu, has_nvidia_smi)
    if problem:
        print(problem, file=sys.stderr)
        return 1
    if args.refuse_without_gpu:
        return 0
    presets, notes = presets_to_run(args.presets, gpu)
    for note in notes:
        print(note)
    record = rt.load_record(rt.RECORD)
    machine = f"{gpu.name}, {os.cpu_count()} cores"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    passed = True
    for preset in presets:
        out = REPO_ROOT / "runs" / f"{stamp}-gpu-check-{preset}"
        print(f"preset {preset} on {gpu.name}: {' '.join(course_command(preset, out, args.notebooks))}", flush=True)
        passed &= subprocess.run(course_command(preset, out, args.notebooks), cwd=REPO_ROOT).returncode == 0
        summary = out / "summary.json"
        if not summary.is_file():
            print(f"preset {preset}: no {summary} was written, nothing recorded", file=sys.stderr)
            passed = False
            continue
        print(f"preset {preset}: {record_run(record, summary, machine)} passing notebook(s) recorded")
    rt.RECORD.parent.mkdir(parents=True, exist_ok=True)
    rt.RECORD.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    rt.README.write_text(rt.render_readme(rt.README.read_text(), record))
    print(f"{rt.RECORD} and the README's runtime columns updated")
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
