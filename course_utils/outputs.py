"""Where a run saves its files: a new folder per run, so a later run never overwrites an earlier one."""

from __future__ import annotations

import itertools
import os
from datetime import datetime
from pathlib import Path

#: When set, a relative ``parent`` of :func:`new_run_dir` is taken inside this folder rather than the working
#: directory. The CI-mode runs of ``make test``, ``make prove`` and ``make seeds`` point it at a temporary folder,
#: so they leave no model copies behind in ``notebooks/outputs/`` (notebooks 08 and 12 save 517 MB a run).
OUTPUTS_ENV = "COURSE_OUTPUTS_DIR"
#: File :func:`new_run_dir` leaves in every folder it creates. ``make clean-outputs`` removes only folders that
#: carry it, and only after asking; a folder you made yourself never has it.
RUN_MARKER = ".course-run"
RUN_MARKER_TEXT = (
    "This folder holds one run of a GRPO course notebook (course_utils.outputs.new_run_dir).\n"
    "`make outputs` lists the runs; `make clean-outputs` removes older runs of the same notebook and preset,\n"
    "and only after you confirm. Delete this file to keep the folder out of its reach.\n"
)


def new_run_dir(parent: str | Path, now: datetime | None = None) -> Path:
    """Create and return a new folder for one run: ``parent/<YYYY-MM-DD_HH-MM-SS>``.

    The folder is created here, atomically, so the function never returns a folder that existed before the
    call: earlier runs stay as they were, and two runs started in the same second get ``<time>-2``,
    ``<time>-3``... It holds only the marker file ``.course-run`` (:data:`RUN_MARKER`), by which ``make
    clean-outputs`` knows the course made it. ``now`` fixes the time (for tests); by default it is the local
    time. A relative ``parent`` lies inside the folder named by ``COURSE_OUTPUTS_DIR`` when that is set (the
    test runs set it).

    Example::

        run_dir = new_run_dir("outputs/08_your_own_data/cpu")  # outputs/08_your_own_data/cpu/2026-11-30_17-05-12
        trainer.save_model(str(run_dir / "model"))
    """
    parent = Path(parent)
    root = os.environ.get(OUTPUTS_ENV, "").strip()
    if root and not parent.is_absolute():
        parent = Path(root) / parent
    if parent.exists() and not parent.is_dir():
        raise NotADirectoryError(
            f"{parent} is a file, but runs are saved in folders inside it: move that file, or choose another "
            "output folder."
        )
    run_dir = new_folder(parent / (now or datetime.now()).strftime("%Y-%m-%d_%H-%M-%S"))
    (run_dir / RUN_MARKER).write_text(RUN_MARKER_TEXT)
    return run_dir


def new_folder(path: Path) -> Path:
    """Create and return ``path``, or ``path-2``, ``path-3``... the first whose name nothing has yet.

    Each try is one atomic ``mkdir``, so the folder returned never existed before the call, even with two runs
    racing for the name. The parent folder is created if needed.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    for n in itertools.count(1):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            candidate.mkdir()  # fails if anything, file or folder, already has this name
        except FileExistsError:
            continue
        return candidate
    raise AssertionError("unreachable")  # itertools.count never ends
