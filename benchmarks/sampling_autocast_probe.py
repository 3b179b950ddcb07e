#!/usr/bin/env python
"""GRPOTrainer's sampling call in mixed precision, as TRL 1.16 makes it and with the course's fix, side by side.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python benchmarks/sampling_autocast_probe.py [--completions 8] [--repeats 2]

Builds notebook 01's trainer at ``cpu-ci`` sizes (32-token completions, groups of 4) with ``bf16=True`` (or
``--float32``), prepares the model as ``train()`` does (accelerate then wraps ``forward`` in autocast), and times
``GRPOTrainer._generate_single_turn`` on the same prompts from the same seed: TRL's method as installed, then
:mod:`course_utils.trl_fixes`'s wrapper (one autocast region around the call). Prints the seconds of each call
and whether both sampled the same tokens. What it measured: ``docs/BENCHMARKS.md``, "Sampling under one
autocast region".
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--completions", type=int, default=8, help="completions per call (groups of 4)")
    parser.add_argument("--repeats", type=int, default=2, help="timed calls of each method")
    parser.add_argument("--float32", action="store_true", help="no mixed precision: the fix then changes nothing")
    args = parser.parse_args(argv)

    from transformers import set_seed
    from trl import GRPOConfig, GRPOTrainer

    from course_utils.data import length_prompts
    from course_utils.hardware import detect_hardware
    from course_utils.models import load_model  # importing it applies the course's TRL fixes
    from course_utils.recipes import SYSTEM_PROMPT

    hardware = detect_hardware()
    model, tokenizer = load_model("auto", hardware=hardware, verbose=False)
    data = length_prompts(seed=0, n_test=8, system_prompt=SYSTEM_PROMPT)
    config = GRPOConfig(output_dir="outputs/sampling_autocast_probe", max_steps=1, num_generations=4,
                        per_device_train_batch_size=args.completions, max_completion_length=32, beta=0.0,
                        bf16=not args.float32, use_cpu=hardware.device == "cpu", report_to="none",
                        save_strategy="no")  # fmt: skip
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=config,
                          train_dataset=data["train"], processing_class=tokenizer)  # fmt: skip
    trainer.model_wrapped = trainer.accelerator.prepare(trainer.model)  # as train() does
    prompts = data["train"]["prompt"][: args.completions // 4]
    prompt_ids = [tokenizer.apply_chat_template(p, add_generation_prompt=True, tokenize=True, return_dict=False)
                  for p in prompts for _ in range(4)]  # fmt: skip
    fixed = GRPOTrainer._generate_single_turn
    methods = {"as installed": getattr(fixed, "original", fixed), "course fix": fixed}
    precision = "float32" if args.float32 else "bf16 autocast"
    print(f"{hardware.name}, {precision}, {args.completions} completions of up to 32 tokens per call")
    tokens = {}
    for repeat in range(args.repeats):
        for name, method in methods.items():
            set_seed(0)
            start = time.perf_counter()
            ids, _ = method(trainer, prompt_ids, None, {}, 4)
            seconds = time.perf_counter() - start
            print(f"  {name:<12} call {repeat + 1}: {seconds:5.2f} s, {sum(map(len, ids))} tokens", flush=True)
            tokens.setdefault(name, ids)
    print("the same tokens:", tokens["as installed"] == tokens["course fix"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
