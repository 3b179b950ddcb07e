"""Seconds per GRPO step with TRL's fused LM head projecting every position (TRL 1.16 on a CPU) against only the
completion's positions (:mod:`course_utils.trl_fixes`), alternating, in one process.

Usage: ``OMP_NUM_THREADS=1 python -m benchmarks.lm_head_probe [PRESET] [STEPS] [REPEATS]`` (defaults: cpu-ci 4 2).
Each measurement is :func:`benchmarks.step_cost.measure` on the course recipe (notebook 01's), after a warm-up step.
"""

from __future__ import annotations

import sys
import tempfile


def main(argv: list[str]) -> None:
    from trl.trainer import utils as trl_utils

    import course_utils.models  # noqa: F401  (applies the fix)
    from benchmarks.step_cost import measure

    preset, steps, repeats = (argv + ["cpu-ci", "4", "2"][len(argv):])[:3]
    fixed = trl_utils._use_triton
    if not getattr(fixed, "course_fix", False):
        raise SystemExit("The LM-head fix is not applied in this process (GRPO_COURSE_TRL_FIXES=0, or the installed "
                         "TRL no longer has the line it changes), so there is nothing to compare: unset the variable.")
    modes = {"every position (TRL on a CPU)": fixed.original, "completion positions only (the fix)": fixed}
    try:
        for repeat in range(int(repeats)):
            for label, rule in modes.items():
                trl_utils._use_triton = rule
                with tempfile.TemporaryDirectory() as out:
                    r = measure("course", preset, int(steps), out)
                print(f"{label:<38} repeat {repeat}: {r['seconds_per_step']:6.2f} s/step "
                      f"(generation {r['share_generate']:.0%}, scoring {r['share_score']:.0%})", flush=True)
    finally:
        trl_utils._use_triton = fixed


if __name__ == "__main__":
    main(sys.argv[1:])
