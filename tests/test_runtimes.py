"""The README's runtime columns come from benchmarks/results/runtimes.json (benchmarks/runtimes.py)."""

import json
import os
import time
from pathlib import Path

import pytest
from repo_modules import load

ROOT = Path(__file__).resolve().parents[1]


def _runtimes():
    return load("benchmarks/runtimes.py")


def test_readme_table_is_the_rendered_record():
    rt = _runtimes()
    readme = (ROOT / "README.md").read_text()
    assert rt.render_readme(readme, rt.load_record()) == readme, (
        "README's runtime columns differ from benchmarks/results/runtimes.json: run `make runtimes`"
    )


def test_every_notebook_has_a_measured_cpu_runtime():
    rt = _runtimes()
    record = rt.load_record()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for preset in ("cpu-ci", "cpu"):
            assert rt.cell(record, path.stem, preset) != rt.NOT_MEASURED, f"{path.stem} has no {preset} runtime"


def test_summaries_add_only_passing_runs_and_the_latest_date_wins(tmp_path):
    rt = _runtimes()
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps([
        {"notebook": "01_demo", "status": "pass", "seconds": 240.0, "record": {"preset": "cpu"}},
        {"notebook": "02_demo", "status": "fail", "seconds": 60.0, "record": {"preset": "cpu"}},
    ]))  # fmt: skip
    record = {"measurements": []}
    assert rt.add_summary(record, summary, date="2026-01-01", host="test") == 1
    assert rt.add_summary(record, summary, date="2026-01-01", host="test") == 1
    assert rt.cell(record, "01_demo", "cpu") == "4.0 min"
    assert rt.cell(record, "02_demo", "cpu") == rt.NOT_MEASURED, "a failed run must not count"
    record["measurements"].append({**record["measurements"][0], "minutes": 5.5})
    assert rt.cell(record, "01_demo", "cpu") == "4.0–5.5 min"
    record["measurements"].append({**record["measurements"][0], "minutes": 3.0, "date": "2026-02-01"})
    assert rt.cell(record, "01_demo", "cpu") == "3.0 min", "older dates are superseded"
    record["measurements"].append({**record["measurements"][-1], "minutes": 9.0, "superseded": "abc1234"})
    assert rt.cell(record, "01_demo", "cpu") == "3.0 min", "a run of code changed since does not count"


def test_a_run_recorded_later_the_same_day_is_the_latest(tmp_path):
    rt = _runtimes()
    summary = tmp_path / "summary.json"
    summary.write_text(
        json.dumps([{"notebook": "01_demo", "status": "pass", "seconds": 120.0, "record": {"preset": "cpu"}}])
    )
    finished = time.mktime((2026, 1, 1, 16, 31, 0, 0, 0, -1))  # the summary was written at 16:31
    os.utime(summary, (finished, finished))
    record = {
        "measurements": [
            {
                "notebook": "01_demo",
                "preset": "cpu",
                "minutes": 6.0,
                "date": "2026-01-01 09:05",
                "machine": "test",
                "source": "an earlier run that morning",
            }
        ]
    }
    rt.add_summary(record, summary, host="test")  # no date given: the summary's own time, to the minute
    assert record["measurements"][-1]["date"] == "2026-01-01 16:31"
    assert rt.cell(record, "01_demo", "cpu") == "2.0 min", "the afternoon's run is the latest, not the morning's"


def test_a_malformed_readme_row_is_refused():
    rt = _runtimes()
    with pytest.raises(ValueError, match="cells"):
        rt.render_readme("| 01 | [x](notebooks/01_x.ipynb) | a | 1 min |", {"measurements": []})


def test_every_notebook_runtime_table_is_the_rendered_record():
    import nbformat

    rt = _runtimes()
    record = rt.load_record()
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        first = nbformat.read(path, as_version=4).cells[0].source
        assert "(measured " in first, f"{path.name} has no measured runtime in its first cell's table"
        assert rt.render_notebook_table(first, record, path.stem) == first, (
            f"{path.name}'s runtime table differs from benchmarks/results/runtimes.json: run `make runtimes`"
        )


def test_a_notebook_table_row_gets_the_range_and_the_date():
    rt = _runtimes()
    record = {"measurements": [
        {"notebook": "01_demo", "preset": "cpu", "minutes": m, "date": "2026-01-02", "machine": "x", "source": "y"}
        for m in (4.0, 4.7)
    ]}  # fmt: skip
    table = "| CPU | `cpu` | 16 | 9 min |\n| T4 | `t4` | 40 | 1 min |\n| hardware | preset | steps | runtime |"
    assert rt.render_notebook_table(table, record, "01_demo").split("\n") == [
        "| CPU | `cpu` | 16 | 4.0–4.7 min (measured 2026-01-02) |",  # the range on the latest date
        "| T4 | `t4` | 40 | not measured yet |",  # no t4 row in the record
        "| hardware | preset | steps | runtime |",  # not a preset row: left alone
    ]
