#!/usr/bin/env python
"""The course's GitHub repository is one setting; this script writes it everywhere it is copied.

    python scripts/set_repository.py OWNER/NAME    # a fork: point badges, Colab cells and docs at it
    python scripts/set_repository.py --check       # list every copy that disagrees with the setting

The setting is ``[tool.grpo-course] repository`` in ``pyproject.toml``. Its copies, which a notebook on Colab
needs before it has cloned anything: each notebook's "Open in Colab" badge (first cell) and the
``REPOSITORY = "..."`` line of its Colab set-up cell, the ``git clone`` lines of README.md and
docs/INSTRUCTORS.md, and ``course_utils.REPOSITORY``. ``tests/test_setup.py`` fails when any copy disagrees.
Only those exact places are rewritten; notebooks keep their cell ids and stay without outputs.
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
SETTING = re.compile(r'^(repository\s*=\s*")([^"]*)(")', re.MULTILINE)
DOCS = ("README.md", "docs/INSTRUCTORS.md")
PACKAGE_INIT = "course_utils/__init__.py"


def read_repository(root: Path = REPO_ROOT) -> str:
    """``owner/name`` from ``[tool.grpo-course] repository`` in pyproject.toml."""
    with open(root / "pyproject.toml", "rb") as file:
        settings = tomllib.load(file).get("tool", {}).get("grpo-course", {})
    if "repository" not in settings:
        raise SystemExit(f"{root / 'pyproject.toml'}: add [tool.grpo-course] repository = \"OWNER/NAME\"")
    return validated(settings["repository"])


def validated(repository: str) -> str:
    if not NAME.match(repository) or repository.endswith((".git", "/")):
        raise SystemExit(f"repository must be GitHub's OWNER/NAME, e.g. my-org/grpo-course (got {repository!r})")
    return repository


def badge_url(repository: str, notebook: str) -> str:
    return f"https://colab.research.google.com/github/{repository}/blob/main/notebooks/{notebook}"


def clone_line(repository: str) -> str:
    return f"git clone https://github.com/{repository} && cd {repository.split('/')[1]}"


def setup_line(repository: str) -> str:
    return f'REPOSITORY = "{repository}"'


# What each copy looks like for any repository (group 1: owner/name). Rewrites replace group 1 only.
BADGE = re.compile(r"https://colab\.research\.google\.com/github/([^/\s)]+/[^/\s)]+)/blob/main/notebooks/")
CELL = re.compile(r'^REPOSITORY = "([^"]*)"', re.MULTILINE)
CLONE = re.compile(r"git clone https://github\.com/([^\s/]+/[^\s/]+) && cd (\S+)")


def _notebooks(root: Path) -> list[Path]:
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def mismatches(root: Path = REPO_ROOT) -> list[str]:
    """One line per copy that disagrees with the setting (or is missing); empty when all agree."""
    import nbformat

    repository = read_repository(root)
    problems = []
    for path in _notebooks(root):
        cells = nbformat.read(path, as_version=4).cells
        if badge_url(repository, path.name) not in cells[0].source:
            problems.append(f"{path.name}: first cell lacks the Colab badge {badge_url(repository, path.name)}")
        setup = [c for c in cells if c.cell_type == "code" and CELL.search(c.source)]
        if len(setup) != 1 or setup_line(repository) not in setup[0].source:
            problems.append(f"{path.name}: needs one Colab set-up cell with {setup_line(repository)}")
    for doc in DOCS:
        found = CLONE.findall((root / doc).read_text())
        expected = (repository, repository.split("/")[1])
        if not found or any(f != expected for f in found):
            problems.append(f"{doc}: clone line should read `{clone_line(repository)}` (found {found})")
    init = (root / PACKAGE_INIT).read_text()
    if setup_line(repository) not in init:
        problems.append(f"{PACKAGE_INIT}: needs {setup_line(repository)}")
    return problems


def _sub_group(pattern: re.Pattern, text: str, replacement: str) -> str:
    """Every match of ``pattern`` with its group 1 replaced, the rest of the match kept."""

    def one(match: re.Match) -> str:
        start, end = match.start(1) - match.start(), match.end(1) - match.start()
        return match[0][:start] + replacement + match[0][end:]

    return pattern.sub(one, text)


def set_repository(repository: str, root: Path = REPO_ROOT) -> list[Path]:
    """Write ``repository`` into the setting and every copy; returns the files that changed."""
    import nbformat

    repository = validated(repository)
    name = repository.split("/")[1]
    changed = []

    def write_text(path: Path, new: str) -> None:
        if path.read_text() != new:
            path.write_text(new)
            changed.append(path)

    pyproject = root / "pyproject.toml"
    read_repository(root)  # the setting must exist before it is rewritten
    write_text(pyproject, SETTING.sub(lambda m: m[1] + repository + m[3], pyproject.read_text(), count=1))
    for path in _notebooks(root):
        notebook = nbformat.read(path, as_version=4)
        before = [c.source for c in notebook.cells]
        notebook.cells[0].source = _sub_group(BADGE, notebook.cells[0].source, repository)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                cell.source = _sub_group(CELL, cell.source, repository)
        if [c.source for c in notebook.cells] != before:
            nbformat.write(notebook, path)
            changed.append(path)
    for doc in DOCS:
        text = (root / doc).read_text()
        write_text(root / doc, CLONE.sub(lambda m: f"git clone https://github.com/{repository} && cd {name}", text))
    init = root / PACKAGE_INIT
    write_text(init, _sub_group(CELL, init.read_text(), repository))
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("repository", nargs="?", help="OWNER/NAME on GitHub, e.g. my-org/grpo-course")
    parser.add_argument("--check", action="store_true", help="only list copies that disagree with the setting")
    args = parser.parse_args(argv)
    if args.check or not args.repository:
        problems = mismatches()
        print("\n".join(problems) or f"every copy agrees with {read_repository()}")
        return 1 if problems else 0
    changed = set_repository(args.repository)
    for path in changed:
        print(f"rewrote {path.relative_to(REPO_ROOT)}")
    problems = mismatches()
    print("\n".join(problems) or f"every copy now points at {args.repository}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
