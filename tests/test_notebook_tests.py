"""The scheduler that runs the notebook tests side by side (``scripts/notebook_tests.py``), on stub jobs."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from repo_modules import REPO_ROOT, load

scheduler = load("scripts/notebook_tests.py")
Job = scheduler.Job


def test_recorded_minutes_are_the_longest_ci_run_of_each_notebooks_latest_day(tmp_path):
    record = tmp_path / "runtimes.json"
    record.write_text(json.dumps({"measurements": [
        {"notebook": "01_a", "preset": "cpu-ci", "minutes": 2.0, "date": "2026-12-01 04:02"},
        {"notebook": "02_b", "preset": "cpu-ci", "minutes": 9.0, "date": "2026-11-30"},
        {"notebook": "01_a", "preset": "cpu-ci", "minutes": 3.0, "date": "2026-12-01 02:13"},  # same day: 3.0 counts
        {"notebook": "01_a", "preset": "cpu-ci", "minutes": 7.0, "date": "2026-11-29"},  # an earlier day does not
        {"notebook": "01_a", "preset": "cpu", "minutes": 50.0, "date": "2026-12-02"},  # nor another preset
        {"notebook": "02_b", "preset": "cpu-ci", "minutes": 20.0, "date": "2026-12-01", "superseded": "older code"},
    ]}))  # fmt: skip
    assert scheduler.ci_minutes(record) == {"01_a": 3.0, "02_b": 9.0}
    assert scheduler.ci_minutes(tmp_path / "missing.json") == {}


def test_the_plan_starts_the_longest_first_and_knows_the_heavy_notebooks():
    jobs = scheduler.plan(["01_a", "12_learned_rewards", "13_new"], {"01_a": 3.0, "12_learned_rewards": 11.0})
    assert [job.name for job in jobs] == ["13_new", "12_learned_rewards", "01_a"]  # no record counts as longest
    assert [job.peak_gb for job in jobs] == [9.3, 8.4, 5.1]  # doctor.py's measured peaks; none: the heaviest (06)


def test_a_notebook_starts_only_where_its_peak_fits_beside_the_running_ones():
    n12, n10, n06, n01 = Job("12", 11, 11.9), Job("10", 11, 9.9), Job("06", 5, 8.1), Job("01", 2, 6.9)
    assert scheduler.next_job([n10, n06, n01], [n12], budget_gb=20.5) is n06  # 11.9 + 9.9 = 21.8 > 20.5; + 8.1 = 20.0
    assert scheduler.next_job([n10, n01], [n12], budget_gb=18.0) is None  # 21.8 and 18.8, both over 18.0: wait
    assert scheduler.next_job([n12, n01], [], budget_gb=5.0) is n12  # alone, any notebook starts, heaviest first
    assert scheduler.next_job([], [n12], budget_gb=50.0) is None


STUB = (
    "import json, sys, time; start = time.time(); time.sleep(0.4); "
    "print(json.dumps([sys.argv[1], start, time.time()])); sys.exit(int(sys.argv[2]))"
)


def spans(results):
    return {name: json.loads(text.strip().splitlines()[-1])[1:] for name, (_, _, text) in results.items()}


def overlap(a, b):
    return a[0] < b[1] and b[0] < a[1]


def test_stub_jobs_run_side_by_side_within_the_workers_and_the_memory(capsys):
    jobs = [Job("12", 9, 11.9), Job("10", 8, 9.9), Job("03", 7, 6.9), Job("01", 1, 6.9)]
    fail = {"03"}
    results = scheduler.run(jobs, lambda job: [sys.executable, "-c", STUB, job.name, str(int(job.name in fail))],
                            workers=2, budget_gb=20.5, env=None, poll_s=0.02)
    assert {name: code for name, (code, _, _) in results.items()} == {"12": 0, "10": 0, "03": 1, "01": 0}
    span = spans(results)
    assert not overlap(span["12"], span["10"])  # 11.9 + 9.9 = 21.8 GB > 20.5: never together
    assert overlap(span["12"], span["03"])  # 11.9 + 6.9 = 18.8 GB fits: 03 starts beside 12 (10 must wait)
    names = list(span)
    for i, a in enumerate(names):  # never three at once with two workers
        for b in names[i + 1:]:
            for c in names[names.index(b) + 1:]:
                assert not (overlap(span[a], span[b]) and overlap(span[a], span[c]) and overlap(span[b], span[c]))
    assert "03" in jobs[0].beside and "10" not in jobs[0].beside
    out = capsys.readouterr().out
    assert "===== 03: FAILED (pytest exit code 1)" in out and "===== 12: passed" in out  # each log printed whole


def test_one_worker_runs_the_notebooks_one_after_another_and_leaves_no_logs_behind(tmp_path, monkeypatch):
    monkeypatch.setattr(scheduler.tempfile, "tempdir", str(tmp_path))  # where the run keeps its logs
    jobs = [Job("a", 2), Job("b", 1)]
    results = scheduler.run(jobs, lambda job: [sys.executable, "-c", STUB, job.name, "0"],
                            workers=1, budget_gb=100.0, env=None, poll_s=0.02)
    span = spans(results)
    assert not overlap(span["a"], span["b"]) and span["a"][1] <= span["b"][0]  # the longest first
    assert list(tmp_path.iterdir()) == []  # the logs were printed, then removed with their folder


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_test_runs_the_unit_tests_then_the_notebooks_side_by_side():
    # run under `make test NOTEBOOKS=...`, this process inherits the caller's variables (MAKEFLAGS): drop them
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "NOTEBOOKS", "NOTEBOOK_WORKERS")}

    def dry(*args):
        return subprocess.run(["make", "-n", "test", "STAMP=", "PYTEST_ARGS=", *args], cwd=REPO_ROOT,
                              capture_output=True, text=True, check=True, env=env).stdout

    assert '-m pytest -m "not notebook"' in dry() and "scripts/notebook_tests.py --workers 0" in dry()
    assert "scripts/notebook_tests.py --workers 1" in dry("NOTEBOOK_WORKERS=1")
    assert "--notebooks" not in dry()  # every notebook unless some are named
    assert "--notebooks 01_first_grpo_run 05_lora_merge_and_inference --" in dry(
        "NOTEBOOKS=01_first_grpo_run 05_lora_merge_and_inference")
