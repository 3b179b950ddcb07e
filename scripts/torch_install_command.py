#!/usr/bin/env python
"""Which torch to install, and from where: prints the arguments for ``pip install`` (nothing when torch is set).

    python scripts/torch_install_command.py [--spec "torch==2.13.0"] [--pip-args "--index-url URL"]

``make setup`` runs it with the venv's Python before anything else is installed, because ``pip install torch``
on Linux resolves to the CUDA build (about 20 ``nvidia-*`` packages, several GB), even on a machine without a
GPU. The decision, in order:

* ``--pip-args`` (``TORCH_PIP_ARGS``) given: those arguments and the spec, exactly; nothing is guessed.
* Colab: nothing (its own CUDA torch is kept).
* torch of the pinned version already installed: nothing.
* Linux with ``nvidia-smi``, macOS, Windows: the spec from the configured package index (a CUDA build on a
  Linux GPU machine; the default wheels on macOS and Windows are CPU builds already).
* Linux without a GPU: the CPU build from PyTorch's CPU wheel index (``torch==X+cpu``, so that pip cannot
  silently take the CUDA build). When that index cannot be reached (a machine that reaches only its own
  package registry), the spec from the configured index, with a warning: such a registry usually carries
  the CPU build (this course's own machines do); a plain PyPI mirror gives the CUDA build.

The reasons go to stderr, the arguments to stdout (one shell-quoted line), so ``eval pip install $(...)``
runs exactly what was printed. Standard library only: it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import platform
import re
import shlex
import shutil
import sys
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

REPO_ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO_ROOT / "constraints.txt"
#: PyPI-compatible index of PyTorch's CPU-only wheels; TORCH_CPU_INDEX points elsewhere (e.g. a mirror).
CPU_INDEX = os.environ.get("TORCH_CPU_INDEX", "https://download.pytorch.org/whl/cpu")
PIN = re.compile(r"^torch==([0-9][0-9a-z.]*)(\+[0-9a-z.]+)?$", re.IGNORECASE)


class Machine(NamedTuple):
    """What the decision looks at; :func:`this_machine` fills it in."""

    system: str  # platform.system(): "Linux", "Darwin", "Windows"
    has_nvidia_smi: bool
    on_colab: bool
    installed_torch: str | None  # version of torch in the target environment, None when absent


class Plan(NamedTuple):
    """``pip install`` arguments (empty: install nothing) and why, for the log."""

    args: list[str]
    reason: str


def this_machine() -> Machine:
    try:
        installed = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    return Machine(platform.system(), shutil.which("nvidia-smi") is not None, _on_colab(), installed)


def _on_colab() -> bool:
    if "COLAB_RELEASE_TAG" in os.environ:  # set in every Colab runtime
        return True
    try:
        return importlib.util.find_spec("google.colab") is not None
    except ModuleNotFoundError:  # no "google" namespace package at all
        return False


def index_reachable(url: str, timeout: float = 5.0) -> bool:
    """Whether ``url`` answers an HTTP request within ``timeout`` seconds (any status below 500 counts)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=timeout) as response:
            return response.status < 500
    except urllib.error.HTTPError as error:
        return error.code < 500
    except (OSError, ValueError):  # DNS failure, refused, timeout, proxy error, malformed URL
        return False


def pinned_spec(constraints: Path = CONSTRAINTS) -> str:
    """``torch==X`` as pinned in constraints.txt (the version the course was tested with)."""
    for line in constraints.read_text().splitlines():
        if line.split("#", 1)[0].strip().lower().startswith("torch=="):
            return line.split("#", 1)[0].strip()
    raise SystemExit(f"{constraints} pins no torch version: add a line 'torch==<version>' or pass --spec")


def _same_release(installed: str, spec: str) -> bool:
    match = PIN.match(spec)
    return bool(match) and installed.split("+", 1)[0] == match[1]


def plan(machine: Machine, spec: str, pip_args: str = "", reachable: Callable[[str], bool] = index_reachable) -> Plan:
    """The pip arguments for ``spec`` on ``machine``; ``reachable`` is only asked on a Linux box without a GPU."""
    if pip_args.strip():
        return Plan([*shlex.split(pip_args), spec], "TORCH_PIP_ARGS given: using it as is")
    if machine.on_colab:
        return Plan([], "Colab: its own torch is kept")
    if machine.installed_torch and (_same_release(machine.installed_torch, spec) or not PIN.match(spec)):
        return Plan([], f"torch {machine.installed_torch} is already installed")
    if machine.system != "Linux":
        return Plan([spec], f"{machine.system}: the default torch wheels are CPU builds (Apple Silicon uses MPS)")
    if machine.has_nvidia_smi:
        return Plan([spec], "nvidia-smi found: the default (CUDA) build from the configured index")
    match = PIN.match(spec)
    if reachable(CPU_INDEX.rstrip("/") + "/torch/"):
        if match:  # the +cpu label makes pip refuse rather than fall back to a CUDA build
            return Plan(["--extra-index-url", CPU_INDEX, f"torch=={match[1]}+cpu"], "no GPU: the CPU build")
        return Plan(["--index-url", CPU_INDEX, spec], "no GPU: the CPU build (PyTorch's CPU index only)")
    return Plan(
        [spec],
        f"no GPU, and {CPU_INDEX} cannot be reached: torch from the configured package index. That is a CPU "
        "build where the registry carries one (pip picks '+cpu' wheels first); on a plain PyPI mirror it is the "
        "CUDA build (about 2.5 GB): set TORCH_PIP_ARGS='--index-url <a CPU wheel index>' to avoid it",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--spec", default="", help="default: the torch pin in constraints.txt (TORCH_SPEC)")
    parser.add_argument("--pip-args", default="", help="use these pip arguments, no detection (TORCH_PIP_ARGS)")
    args = parser.parse_args(argv)
    spec = args.spec.strip() or pinned_spec()
    result = plan(this_machine(), spec, args.pip_args)
    print(f"torch: {result.reason}", file=sys.stderr)
    print(shlex.join(result.args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
