"""Every lesson notebook, executed end to end in CI mode (preset ``cpu-ci``), offline.

A notebook passes when papermill runs it without error AND its own learning checks pass: each
notebook records what it measured on held-out prompts (``course_utils.results``) and asserts it.
"""

import nbformat
import pytest
from repo_modules import load

runner = load("scripts/notebook_runner.py")
NOTEBOOK_DIR, course_notebooks, execute_notebook = runner.NOTEBOOK_DIR, runner.course_notebooks, runner.execute_notebook

NOTEBOOKS = course_notebooks()
#: Numbers kept free for a lesson an open issue plans, so the later notebooks keep the number their issues give them.
RESERVED: dict[int, str] = {}


def test_every_notebook_is_a_numbered_lesson_that_ci_runs():
    """A notebook named outside the NN_name.ipynb pattern would be left out of CI and make course, silently."""
    unnumbered = sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb") if p not in NOTEBOOKS)
    assert not unnumbered, f"rename {unnumbered} to NN_name.ipynb (the next free NN), or move them out of notebooks/"
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert not set(numbers) & set(RESERVED), f"notebook {sorted(set(numbers) & set(RESERVED))} is written: unreserve it"
    expected = [n for n in range(1, max(numbers, default=0) + 1) if n not in RESERVED]
    assert numbers and numbers == expected, f"lessons must be numbered 01, 02, ... (reserved: {RESERVED}): {numbers}"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_learns_in_ci_mode(path, tmp_path):
    # only the preset changes: each notebook runs with its own published parameters (seed included)
    # 08's and 12's saved models go to pytest's temporary folder, not to notebooks/outputs/ (517 MB each, every run)
    run = execute_notebook(path, tmp_path, {"preset": "cpu-ci"}, run_folders=tmp_path / "run-folders")
    assert run.error is None, run.error
    assert run.record is not None, "the notebook did not call record_results"
    assert run.record["preset"] == "cpu-ci"
    assert run.record["checks"], "a notebook must check what it claims to teach"
    assert run.passed, f"learning checks failed: {run.record['checks']} with {run.record['metrics']}"
    executed = nbformat.read(run.output, as_version=4)
    errors = [
        o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"
    ]
    assert not errors
    memory = run.record["peak_memory_mb"]
    print(f"{path.stem}: {run.seconds:.0f} s, peak kernel memory {memory} MB, {run.record['metrics']}")
