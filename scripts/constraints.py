#!/usr/bin/env python
"""constraints.txt: the exact versions the course's tests passed with, which ``make setup`` installs.

    python scripts/constraints.py write [--python .venv/bin/python]    # make constraints: pin what is installed
    python scripts/constraints.py compare --python <venv>/bin/python    # make upgrade-check: what moved since

Write it after ``make test`` passed in ``.venv``. Editable installs (the course itself) and packages installed
from a local path are left out, and local version labels are dropped (``torch==2.13.0+cpu`` is pinned as
``torch==2.13.0``) so that the same file serves the CPU build and a GPU machine's CUDA build. Standard library
only.
"""

from __future__ import annotations

import argparse
import platform
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO_ROOT / "constraints.txt"
HEADER = """\
# The exact versions the course's tests passed with: `make setup` installs with `-c constraints.txt`.
# Written by `make constraints` (scripts/constraints.py) from .venv after `make test` passed ({where}).
# torch is pinned without its build label (+cpu, +cu128): make setup picks the build for the machine
# (scripts/torch_install_command.py). Colab ignores this file: requirements-colab.txt keeps ranges.
# `make upgrade-check` installs the newest versions instead and runs the unit tests.
"""
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;+]+)(\+[^\s;]+)?$")


def canonical(name: str) -> str:
    """The package name as pip compares it (PEP 503): case and ``-_.`` runs do not matter."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins_from_freeze(lines: list[str], exclude: tuple[str, ...] = ("course-utils",)) -> dict[str, str]:
    """``{name: version}`` from ``pip freeze`` lines: no editables, no local paths, no local version labels."""
    pins = {}
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith(("#", "-e ", "--")):
            continue
        match = PIN.match(line)
        if match is None:  # "name @ file:///..." or "name @ git+..." : not reproducible from an index
            continue
        if canonical(match[1]) not in {canonical(e) for e in exclude}:
            pins[match[1]] = match[2]
    return pins


def read_constraints(path: Path = CONSTRAINTS) -> dict[str, str]:
    """``{canonical name: version}`` pinned in a constraints file."""
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: run `make constraints` in a set-up checkout")
    return {canonical(name): version for name, version in pins_from_freeze(path.read_text().splitlines()).items()}


def render(pins: dict[str, str], where: str) -> str:
    body = "".join(f"{name}=={version}\n" for name, version in sorted(pins.items(), key=lambda kv: canonical(kv[0])))
    return HEADER.format(where=where) + body


def drift(pinned: dict[str, str], installed: dict[str, str]) -> list[str]:
    """One line per package whose installed version differs from its pin (installed ones only)."""
    lines = []
    for name, version in sorted(installed.items(), key=lambda kv: canonical(kv[0])):
        tested = pinned.get(canonical(name))
        if tested is not None and tested != version:
            lines.append(f"{name}: {tested} (constraints.txt) -> {version}")
    return lines


def freeze(python: str) -> list[str]:
    command = [python, "-m", "pip", "--disable-pip-version-check", "freeze", "--exclude-editable"]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=("write", "compare"))
    parser.add_argument("--python", default=sys.executable, help="the environment's Python (default: this one)")
    args = parser.parse_args(argv)
    installed = pins_from_freeze(freeze(args.python))
    if args.command == "write":
        where = f"Python {platform.python_version()}, {platform.system()} {platform.machine()}"
        CONSTRAINTS.write_text(render(installed, where))
        print(f"{CONSTRAINTS.name}: {len(installed)} packages pinned from {args.python}")
        return 0
    moved = drift(read_constraints(), installed)
    print(f"{len(moved)} package(s) differ from constraints.txt" + (":" if moved else "."))
    for line in moved:
        print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
