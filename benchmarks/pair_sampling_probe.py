#!/usr/bin/env python
"""Notebook 12's preference sampling in fewer, larger generation calls: does it pay?

    cd notebooks && OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 ../.venv/bin/python ../benchmarks/pair_sampling_probe.py

Notebook 12 (CI mode) samples 4 completions for each of 40 training prompts and 24 held-out prompts, one
``generate`` call per sample index and prompt set: 8 calls of 40 or 24 completions of 32 tokens. This times that
against the same 256 completions asked for in one call (batches of 64, then of 128), twice each. One call would
draw other random numbers, so the notebook's pairs and every number after them would change: the lever is kept
only if it saves enough to pay for proving the notebook again. Measured in docs/BENCHMARKS.md (not kept, 1.15x).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from course_utils.data import length_prompts
from course_utils.evaluation import generate
from course_utils.hardware import detect_hardware
from course_utils.models import load_model


def main() -> None:
    model, tokenizer = load_model("auto", hardware=detect_hardware())
    data = length_prompts(seed=0, n_test=24, system_prompt="Answer in one short sentence.")
    train, test = list(data["train"].select(range(40))["prompt"]), list(data["test"]["prompt"])

    def sample(prompts: list, batch_size: int, seed: int) -> None:
        generate(
            model,
            tokenizer,
            prompts,
            max_new_tokens=32,
            batch_size=batch_size,
            do_sample=True,
            seed=seed,
            progress=False,
        )

    def timed(label: str, run: Callable[[], None]) -> None:
        start = time.perf_counter()
        run()
        print(f"{label}: {time.perf_counter() - start:.1f} s", flush=True)

    for _ in range(2):
        timed(
            "8 calls, 4 x (40 + 24), as the notebook",
            lambda: [sample(p, 64, j) for p in (train, test) for j in range(4)],
        )
        timed("1 call of 256, batches of 64", lambda: sample(train * 4 + test * 4, 64, 0))
        timed("1 call of 256, batches of 128", lambda: sample(train * 4 + test * 4, 128, 0))


if __name__ == "__main__":
    main()
