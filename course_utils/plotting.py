"""Plots for the notebooks: a live reward curve during training, and any logged metric afterwards.

TRL's notebook progress bar shows only the training loss, which for GRPO hovers near zero
whatever happens. The reward is what tells you whether the model is learning, so the course
draws it live with :class:`LiveRewardPlot`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from transformers import TrainerCallback

METRIC_LABELS = {
    "reward": "mean reward",
    "reward_std": "reward std (whole batch)",
    "frac_reward_zero_std": "fraction of groups with zero reward std",
    "completions/mean_length": "mean completion length (tokens)",
    "completions/clipped_ratio": "fraction truncated",
    "entropy": "entropy",
    "kl": "KL to reference",
    "step_time": "seconds per step",
}


def metric_series(log_history: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one metric from ``trainer.state.log_history``."""
    points = [(row["step"], float(row[key])) for row in log_history if key in row and "step" in row]
    return [s for s, _ in points], [v for _, v in points]


def plot_metrics(
    log_history: Sequence[dict[str, Any]],
    keys: Sequence[str] = ("reward", "reward_std", "completions/mean_length"),
    title: str | None = None,
):
    """One small panel per logged metric, against the training step. Returns the figure."""
    available = sorted({k for row in log_history for k in row})
    missing = [k for k in keys if k not in available]
    if missing:
        raise KeyError(f"Metric(s) {missing} were not logged. Logged metrics: {available}")
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.2), squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        steps, values = metric_series(log_history, key)
        ax.plot(steps, values, marker="o", markersize=3)
        ax.set_title(METRIC_LABELS.get(key, key), fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def compare_runs(
    histories: dict[str, Sequence[dict[str, Any]]],
    keys: Sequence[str] = ("reward", "reward_std", "frac_reward_zero_std"),
    columns: int = 4,
    title: str | None = None,
):
    """Runs side by side: one panel per metric, one line per run (``label -> trainer.state.log_history``).

    A metric a run did not log (e.g. ``kl`` when ``beta=0``) is left out of that run's lines, not an error.
    """
    if not histories:
        raise ValueError("compare_runs needs at least one run.")
    logged = {k for history in histories.values() for row in history for k in row}
    missing = [k for k in keys if k not in logged]
    if missing:
        raise KeyError(f"Metric(s) {missing} were logged by none of the runs. Logged metrics: {sorted(logged)}")
    rows = -(-len(keys) // columns)
    fig, axes = plt.subplots(rows, min(columns, len(keys)), figsize=(4.2 * min(columns, len(keys)), 3.0 * rows),
                             squeeze=False)  # fmt: skip
    for ax, key in zip(axes.flat, keys, strict=False):  # the grid may have spare panels
        for label, history in histories.items():
            steps, values = metric_series(history, key)
            if steps:
                ax.plot(steps, values, marker="o", markersize=2, label=label)
        ax.set_title(METRIC_LABELS.get(key, key), fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


class LiveRewardPlot(TrainerCallback):
    """Redraws the mean reward (± the batch's std, TRL's ``reward_std``) in the notebook at every logging step.

    Use ``callbacks=[LiveRewardPlot()]`` in ``GRPOTrainer``; set ``logging_steps=1`` to see every step.
    Outside a notebook it draws nothing. ``first_point_at`` is the ``time.perf_counter()`` of the first
    point, so a notebook can report how long a learner waited for the curve to appear.
    """

    def __init__(self, key: str = "reward", title: str = "Reward during training"):
        self.key, self.title = key, title
        self.steps: list[int] = []
        self.means: list[float] = []
        self.stds: list[float] = []
        self._handle = None
        self.first_point_at: float | None = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or self.key not in logs:
            return
        if self.first_point_at is None:
            self.first_point_at = time.perf_counter()
        self.steps.append(state.global_step)
        self.means.append(float(logs[self.key]))
        self.stds.append(float(logs.get(f"{self.key}_std", 0.0)))
        self._draw()

    def _draw(self) -> None:
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            return
        if get_ipython() is None:
            return
        fig, ax = plt.subplots(figsize=(6, 3.2))
        low = [m - s for m, s in zip(self.means, self.stds, strict=True)]
        high = [m + s for m, s in zip(self.means, self.stds, strict=True)]
        ax.fill_between(self.steps, low, high, alpha=0.2, label="± reward std")
        ax.plot(self.steps, self.means, marker="o", markersize=3, label=self.key)
        ax.set_xlabel("step")
        ax.set_ylabel(self.key)
        ax.set_title(self.title)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        if self._handle is None:
            self._handle = display(fig, display_id=True)
        else:
            self._handle.update(fig)
        plt.close(fig)
