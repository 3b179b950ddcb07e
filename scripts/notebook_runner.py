"""Execute course notebooks headless with papermill (``make course``, ``make prove`` and the tests).

Repository tooling, not part of the ``course_utils`` package learners import: it knows the repository's layout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from course_utils.outputs import OUTPUTS_ENV, new_folder
from course_utils.results import RESULTS_ENV

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_DIR = REPO_ROOT / "notebooks"


def new_record_folder(out: Path | None, default: Path) -> Path:
    """The folder a ``make course`` / ``make prove`` run writes its executed notebooks and summary into.

    ``out`` (the ``--out`` option) must not hold an earlier run's files: a folder with anything in it is refused,
    naming ``--out``. Without ``out`` it is ``default``, or ``default-2``, ``-3``... when a run started in the
    same second already has that name. Either way the folder is created here, so no earlier run is overwritten.
    """
    if out is not None:
        if out.exists() and not out.is_dir():
            raise SystemExit(f"--out {out} is a file, not a folder: pass a new folder, or leave --out out.")
        if out.exists() and any(out.iterdir()):
            raise SystemExit(f"--out {out} already holds an earlier run's files: pass a new folder, or leave --out "
                             "out for a new runs/<time> folder.")  # fmt: skip
        out.mkdir(parents=True, exist_ok=True)
        return out
    return new_folder(default)


def course_notebooks() -> list[Path]:
    """The numbered lesson notebooks, in order (``notebooks/NN_*.ipynb``)."""
    return sorted(p for p in NOTEBOOK_DIR.glob("[0-9][0-9]_*.ipynb"))


@dataclass
class NotebookRun:
    notebook: str
    output: Path
    seconds: float
    error: str | None = None
    record: dict[str, Any] | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.error is None and self.record is not None and bool(self.record.get("passed"))

    @property
    def status(self) -> str:
        if self.error:
            return "error"
        if self.record is None:
            return "no results recorded"
        return "pass" if self.record["passed"] else "did not learn"


def execute_notebook(
    path: Path, out_dir: Path, parameters: dict[str, Any] | None = None, run_folders: Path | None = None
) -> NotebookRun:
    """Run one notebook with papermill; its results JSON lands in ``out_dir/results``.

    ``run_folders``: where the notebook's new run folders go (``course_utils.outputs.new_run_dir``: 08's and 12's
    saved models) instead of ``notebooks/outputs/``; the test runs pass a temporary folder, ``make course`` none.
    """
    import papermill

    parameters = dict(parameters or {})
    out_dir.mkdir(parents=True, exist_ok=True)
    results_dir = (out_dir / "results").resolve()  # the kernel runs in the notebook's folder, not ours
    output = out_dir / path.name
    env_before = {k: os.environ.get(k) for k in (RESULTS_ENV, OUTPUTS_ENV, "PATH")}
    os.environ[RESULTS_ENV] = str(results_dir)
    if run_folders is not None:
        os.environ[OUTPUTS_ENV] = str(Path(run_folders).resolve())
    # The kernel must be this interpreter (the course venv), whatever else is on PATH.
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    start = time.perf_counter()
    error = None
    try:
        papermill.execute_notebook(
            str(path), str(output), parameters=parameters, cwd=str(path.parent),
            kernel_name="python3", progress_bar=False, log_output=False,
        )  # fmt: skip
    except Exception as err:  # papermill raises PapermillExecutionError with the failing cell
        error = f"{type(err).__name__}: {err}"
    finally:
        for key, value in env_before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    seconds = time.perf_counter() - start
    results_file = results_dir / f"{path.stem}.json"
    record = json.loads(results_file.read_text()) if results_file.is_file() else None
    return NotebookRun(path.stem, output, seconds, error, record, parameters)
