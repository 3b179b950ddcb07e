"""Is a gain real? Paired comparisons of the same held-out prompts before and after training.

A notebook's learning claim compares the model GRPO *started from* (the base model, a warm start, or the
previous stage) with the model GRPO produced, on the same held-out prompts. Each prompt gives one paired
difference (after minus before). :func:`paired_gain` estimates the mean difference with a bootstrap over
prompts, and a claim passes only when the interval's lower bound is above zero: a tie (GRPO changed
nothing, as when its learning rate is 0) can never pass.

>>> gain = paired_gain(before=[0, 0, 1, 0] * 10, after=[1, 1, 1, 0] * 10)
>>> round(gain.mean, 2), gain.low > 0
(0.5, True)
>>> paired_gain(before=[1, 0] * 20, after=[1, 0] * 20).low > 0  # a tie is not a gain
False
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence

from course_utils.evaluation import Estimate


def paired_gain(
    before: Sequence[float],
    after: Sequence[float],
    *,
    higher_is_better: bool = True,
    n_boot: int = 2000,
    seed: int = 0,
) -> Estimate:
    """Mean of ``after[i] - before[i]`` over prompts, with a 95% percentile-bootstrap interval.

    Args:
        before: one score per held-out prompt for the model training started from.
        after: the same prompts, in the same order, scored for the trained model.
        higher_is_better: False for errors: the gain is then ``before[i] - after[i]``, so that a positive gain
            is always an improvement.
        n_boot: bootstrap resamples of the prompts.
        seed: seed of the resampling (the interval is reproducible).
    """
    if len(before) != len(after):
        raise ValueError(f"paired_gain needs one score per prompt on both sides: got {len(before)} and {len(after)}.")
    if not before:
        raise ValueError("paired_gain needs at least one prompt.")
    sign = 1.0 if higher_is_better else -1.0
    diffs = [sign * (float(a) - float(b)) for b, a in zip(before, after, strict=True)]
    mean = statistics.fmean(diffs)
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(statistics.fmean(rng.choices(diffs, k=n)) for _ in range(n_boot))
    low, high = means[int(0.025 * n_boot)], means[min(n_boot - 1, int(0.975 * n_boot))]
    return Estimate(mean, min(low, mean), max(high, mean), n)


def describe_gain(name: str, gain: Estimate, unit: str = "points", scale: float = 100.0) -> str:
    """``"accuracy: +54.2 points (95% CI +41.7 to +66.7, n=48)"``: a gain as the checks cell shows it."""
    return (f"{name}: {gain.mean * scale:+.1f} {unit} (95% CI {gain.low * scale:+.1f} to {gain.high * scale:+.1f}, "
            f"n={gain.n})")
