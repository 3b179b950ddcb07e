"""Every lesson notebook, executed end to end in CI mode (preset ``cpu-ci``), offline.

A notebook passes when papermill runs it without error AND its own learning checks pass: each
notebook records what it measured on held-out prompts (``course_utils.results``) and asserts it.
"""

import nbformat
import pytest

from course_utils.runner import course_notebooks, execute_notebook

NOTEBOOKS = course_notebooks()


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks/NN_*.ipynb found"


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_learns_in_ci_mode(path, tmp_path):
    # only the preset changes: each notebook runs with its own published parameters (seed included)
    run = execute_notebook(path, tmp_path, {"preset": "cpu-ci"})
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
    print(f"{path.stem}: {run.seconds:.0f} s, {run.record['metrics']}")
