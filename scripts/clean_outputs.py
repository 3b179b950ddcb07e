"""List the notebooks' run folders and remove older ones, only after asking (`make outputs`, `make clean-outputs`).

Every run of a notebook that saves a model (04, 05, 08, 12) or results (09) writes into a new folder from
``course_utils.outputs.new_run_dir``, so no run overwrites another; 04, 05, 08 and 12 save about 0.5 GB a run.
This script finds those folders under ``notebooks/outputs/`` and ``outputs/`` by the marker file that
``new_run_dir`` leaves in each (``.course-run``), groups them by their parent folder (one notebook and preset),
and keeps the newest ``--keep`` of each group::

    python scripts/clean_outputs.py                     # list the run folders and their sizes; removes nothing
    python scripts/clean_outputs.py --clean --keep 1    # remove all but each group's newest run, after asking
    python scripts/clean_outputs.py --clean --keep 1 --yes  # the same without asking (make clean-outputs CONFIRM=yes)

Only a folder carrying the marker as a regular file is removed; links are never followed, so nothing outside
the folder is touched. A folder without the marker (your own, or a run from before the course marked its runs)
is never removed: its size is reported, and you delete it yourself if you no longer need it.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))  # course_utils, also before `pip install -e .`

from course_utils.outputs import RUN_MARKER  # noqa: E402  (standard library only)

#: Where the notebooks write (they run in notebooks/; notebook 09's script writes under the repository's outputs/).
ROOTS = (REPO_ROOT / "notebooks" / "outputs", REPO_ROOT / "outputs")
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d)(?:-(\d+))?$")  # new_run_dir's names: <time> or <time>-<n>


def is_run_folder(path: Path) -> bool:
    """A folder (not a link) that carries the course's run marker as a regular file."""
    marker = path / RUN_MARKER
    return path.is_dir() and not path.is_symlink() and marker.is_file() and not marker.is_symlink()


def find_runs(roots: Iterable[Path] = ROOTS) -> list[Path]:
    """Every marked run folder under ``roots``, without following links or looking inside a run."""
    runs = []
    for root in roots:
        for folder, subfolders, _ in os.walk(root):  # os.walk does not follow links by default
            if is_run_folder(Path(folder)):
                runs.append(Path(folder))
                subfolders.clear()
    return sorted(runs)


def size_bytes(path: Path) -> int:
    """Bytes of the files under ``path``, links counted as links (never followed)."""
    if path.is_symlink() or not path.is_dir():
        return path.lstat().st_size
    total = 0
    for folder, _, files in os.walk(path):
        total += sum((Path(folder) / name).lstat().st_size for name in files)
    return total


def _age_key(run: Path) -> tuple[str, int, str]:
    """Oldest first: by the time in the name, then new_run_dir's -2, -3... suffix (numerically)."""
    match = _STAMP.match(run.name)
    return (match.group(1), int(match.group(2) or 1), run.name) if match else ("", 0, run.name)


def plan(runs: Iterable[Path], keep: int) -> tuple[list[Path], list[Path]]:
    """Split ``runs`` into (kept, removed): the newest ``keep`` of each parent folder are kept."""
    groups: dict[Path, list[Path]] = {}
    for run in runs:
        groups.setdefault(run.parent, []).append(run)
    kept, removed = [], []
    for group in groups.values():
        group.sort(key=_age_key)
        cut = len(group) - keep
        removed += group[: max(cut, 0)]
        kept += group[max(cut, 0) :]
    return sorted(kept), sorted(removed)


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path)


def _gb(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e8 else f"{n / 1e6:.1f} MB"


def _keep_count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(
            f"KEEP (--keep) must be a whole number of runs to keep per notebook and preset, 0 or more; got {text!r}. "
            "For example: make clean-outputs KEEP=1"
        )
    return int(text)


def main(argv: list[str] | None = None, roots: Iterable[Path] = ROOTS, ask: Callable[[str], str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clean", action="store_true", help="remove older runs (default: only list)")
    parser.add_argument("--keep", type=_keep_count, default=1, help="newest runs kept per notebook and preset")
    parser.add_argument("--yes", action="store_true", help="remove without asking")
    args = parser.parse_args(argv)
    roots = [Path(r) for r in roots]
    runs = find_runs(roots)
    removed = plan(runs, args.keep)[1] if args.clean else []
    sizes = {run: size_bytes(run) for run in runs}
    for run in runs:
        mark = "remove" if run in removed else "keep  " if args.clean else "      "
        print(f"{mark} {_gb(sizes[run]):>9}  {_shown(run)}")
    everything = sum(size_bytes(root) for root in roots if root.exists())
    unmarked = everything - sum(sizes.values())
    where = ", ".join(_shown(root) for root in roots)
    print(f"{len(runs)} run folders, {_gb(sum(sizes.values()))}; everything else under {where}: {_gb(unmarked)} "
          "(never removed by this command)")  # fmt: skip
    if not args.clean or not removed:
        if args.clean:
            print(f"Nothing to remove: no notebook and preset has more than {args.keep} run(s).")
        return 0
    freed = _gb(sum(sizes[run] for run in removed))
    if not args.yes:
        if ask is None and not sys.stdin.isatty():
            print(f"Nothing removed. To remove the {len(removed)} folders marked 'remove' ({freed}) without being "
                  "asked, run: make clean-outputs CONFIRM=yes (or add --yes).")  # fmt: skip
            return 1
        answer = (ask or input)(f"Remove the {len(removed)} folders marked 'remove' ({freed})? Type yes: ")
        if answer.strip().lower() != "yes":
            print("Nothing removed.")
            return 0  # the user's answer, not an error
    for run in removed:
        if is_run_folder(run):  # checked again just before: a folder changed since the listing is left alone
            shutil.rmtree(run)  # never follows links inside the tree (they are unlinked, not entered)
    print(f"Removed {len(removed)} run folders ({freed}); kept the newest {args.keep} of each notebook and preset.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
