import json
import sys
import time
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

from repo_modules import load  # noqa: E402

from course_utils.plotting import LiveRewardPlot, metric_series, plot_metrics  # noqa: E402
from course_utils.results import RESULTS_ENV, record_results  # noqa: E402

HISTORY = [
    {"step": 1, "reward": -100.0, "reward_std": 20.0, "loss": 0.0},
    {"step": 2, "reward": -60.0, "reward_std": 15.0, "loss": 0.0},
    {"train_runtime": 10.0, "step": 2},
]


def test_metric_series_and_plot():
    assert metric_series(HISTORY, "reward") == ([1, 2], [-100.0, -60.0])
    fig = plot_metrics(HISTORY, ["reward", "reward_std"])
    assert len(fig.axes) == 2
    assert list(fig.axes[0].lines[0].get_ydata()) == [-100.0, -60.0]


def test_plot_names_missing_metrics():
    with pytest.raises(KeyError, match=r"\['kl'\] were not logged.*'reward'"):
        plot_metrics(HISTORY, ["reward", "kl"])


def test_compare_runs_draws_one_line_per_run_and_skips_unlogged_metrics():
    from course_utils.plotting import compare_runs

    a = [{"step": 1, "reward": -5.0, "kl": 0.1}, {"step": 2, "reward": -3.0, "kl": 0.2}]
    b = [{"step": 1, "reward": -6.0}, {"step": 2, "reward": -6.0}]
    fig = compare_runs({"a": a, "b": b}, ["reward", "kl"])
    reward_ax, kl_ax = fig.axes[:2]
    assert len(reward_ax.lines) == 2 and len(kl_ax.lines) == 1
    with pytest.raises(KeyError, match="entropy"):
        compare_runs({"a": a}, ["entropy"])
    with pytest.raises(ValueError, match="at least one run"):
        compare_runs({})


def test_live_plot_collects_reward_and_std_outside_a_notebook():
    class State:
        global_step = 0

    cb, state = LiveRewardPlot(), State()
    cb.on_log(None, state, None, logs={"loss": 0.0})  # a log without the reward is not a point
    assert cb.first_point_at is None
    for row in HISTORY:
        state.global_step = row["step"]
        cb.on_log(None, state, None, logs=row)
    assert cb.steps == [1, 2] and cb.means == [-100.0, -60.0] and cb.stds == [20.0, 15.0]
    assert cb.first_point_at is not None and cb.first_point_at <= time.perf_counter()


def test_error_bars_from_estimates_draw_at_0_and_100_percent_and_without_an_interval():
    """Notebooks 02 and 08 draw ``yerr=[[e.mean - e.low ...], [e.high - e.mean ...]]``: a run that scores 100%
    (or 0%) must not crash there, nor an estimate from one value (NaN bounds: matplotlib leaves that bar out)."""
    import matplotlib.pyplot as plt

    from course_utils.evaluation import mean_with_ci, proportion_ci

    estimates = [proportion_ci(k, n) for n in (6, 11, 20, 21, 64) for k in (0, n)] + [mean_with_ci([0.5])]
    fig, ax = plt.subplots()
    ax.bar(range(len(estimates)), [e.mean for e in estimates],
           yerr=[[e.mean - e.low for e in estimates], [e.high - e.mean for e in estimates]])  # fmt: skip
    ax.errorbar(range(len(estimates)), [e.mean for e in estimates],
                yerr=[[e.mean - e.low for e in estimates], [e.high - e.mean for e in estimates]])  # fmt: skip
    plt.close(fig)


def test_record_results_writes_json_under_the_runner(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(RESULTS_ENV, str(tmp_path))
    record = record_results("00_demo", {"error_before": 100.0, "error_after": 30.123456}, {"halved": True}, seed=0)
    saved = json.loads((tmp_path / "00_demo.json").read_text())
    assert saved == record and saved["passed"] is True and saved["metrics"]["error_after"] == 30.1235
    assert "[PASS] halved" in capsys.readouterr().out


def test_record_results_keeps_small_numbers(monkeypatch):
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    record = record_results("00_demo", {"gradient_difference": 3.1234567e-06, "big": 123456.789}, {"ok": True})
    assert record["metrics"] == {"gradient_difference": 3.12346e-06, "big": 123457.0}


def test_record_results_fails_when_any_check_fails(monkeypatch):
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    record = record_results("00_demo", {"x": 1}, {"a": True, "b": False})
    assert record["passed"] is False and record["checks"] == {"a": True, "b": False}


def test_guards_are_kept_apart_from_learning_checks(monkeypatch, capsys):
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    record = record_results("00_demo", {"x": 1}, {"learned": False}, guards={"no collapse": True})
    assert record["checks"] == {"learned": False} and record["guards"] == {"no collapse": True}
    assert record["passed"] is False, "a failed learning check fails the run even when every guard passes"
    record = record_results("00_demo", {"x": 1}, {"learned": True}, guards={"no collapse": False})
    assert record["passed"] is False, "a failed guard fails the run too"
    out = capsys.readouterr().out
    assert "Learning checks" in out and "Guards" in out


def test_record_results_keeps_the_peak_memory(monkeypatch):
    """The record carries the process's peak RSS: 200 MB this test holds must show in it."""
    monkeypatch.delenv(RESULTS_ENV, raising=False)
    ballast = bytearray(200_000_000)  # 200 MB touched: RSS grows by about that much
    ballast[::4096] = b"\x01" * len(ballast[::4096])
    record = record_results("00_demo", {"x": 1}, {"ok": True})
    del ballast
    if sys.platform == "win32":
        assert record["peak_memory_mb"] is None  # Windows has no getrusage: the record says so instead of guessing
    else:
        assert record["peak_memory_mb"] >= 200, f"peak RSS {record['peak_memory_mb']} MB, below the 200 MB held here"


def test_course_summary_shows_each_notebooks_peak_memory(tmp_path):
    """make course's summary.md: 5731.4 MB -> "5.7 GB"; a run that recorded nothing shows "-"."""
    runner = load("scripts/notebook_runner.py")
    summarise = load("scripts/run_course.py").summarise
    learned = runner.NotebookRun("01_demo", tmp_path, 90.0, None, {"passed": True, "checks": {"ok": True},
                                                                   "metrics": {}, "peak_memory_mb": 5731.4})
    crashed = runner.NotebookRun("02_demo", tmp_path, 30.0, "PapermillExecutionError: boom", None)
    rows = [line for line in summarise([learned, crashed], "cpu-ci").splitlines() if "_demo" in line]
    assert rows[0].startswith("| 01_demo | pass | 1.5 min | 5.7 GB |")  # 90 s = 1.5 min
    assert rows[1].startswith("| 02_demo | error | 0.5 min | - |")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork inheritance is Linux's getrusage")
def test_peak_memory_is_the_processs_own_not_its_parents_at_the_fork():
    """A child started while its parent held 500 MB reports its own few dozen MB (getrusage said 500+)."""
    import subprocess

    ballast = bytearray(500_000_000)
    ballast[::4096] = b"\x01" * len(ballast[::4096])
    code = "from course_utils.results import peak_memory_mb; print(peak_memory_mb())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    del ballast
    assert float(out) < 400, f"the child reported {out.strip()} MB: its parent's memory at the fork, not its own"
