#!/usr/bin/env python
"""Why notebook 11 learns nothing at some seeds: how many of GRPO's sampled completions hit the token budget.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/clipped_batch_probe.py --seed 1111
    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/clipped_batch_probe.py --seed 1111 --batch 12

Runs notebook 11's GRPO objective alone with its CI-mode settings (cpu-ci sizes, bf16 autocast where the CPU has
native bf16, ``num_iterations=2``, learning rate 5e-5, target 50 characters) and prints, per sampled batch, the
share of completions TRL logged as cut off at ``max_completion_length`` (``completions/clipped_ratio``), then the
held-out length error before and after. A batch whose completions all reach the budget shows GRPO no shorter
answer: its rewards differ only by the characters in 32 tokens. Measured in docs/PROOF.md ("What the seed runs
found", 2026-12-03).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import time

from transformers import set_seed
from trl import GRPOConfig, GRPOTrainer

from course_utils.data import length_prompts
from course_utils.evaluation import generate, length_report
from course_utils.hardware import detect_hardware
from course_utils.models import load_model
from course_utils.presets import get_preset, with_cpu_bf16
from course_utils.rewards import make_length_reward

TARGET_CHARS = 50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps (notebook 11 on a CPU: 4)")
    parser.add_argument("--batch", type=int, default=8, help="completions per step (cpu-ci: 8, 2 prompts x 4)")
    args = parser.parse_args()

    set_seed(args.seed)
    hardware = detect_hardware()
    preset = with_cpu_bf16(get_preset("cpu-ci", hardware), hardware, enabled=True)
    data = length_prompts(seed=args.seed, n_test=preset.n_eval, system_prompt="Answer in one short sentence.")
    model, tokenizer = load_model("auto", hardware=hardware)

    def error(policy) -> float:
        completions, finished = generate(
            policy,
            tokenizer,
            data["test"]["prompt"],
            progress=False,
            max_new_tokens=preset.max_completion_length,
            batch_size=preset.eval_batch_size,
        )
        return length_report(completions, TARGET_CHARS, finished, topics=data["test"]["topic"])["length_error"].mean

    before = error(model)
    set_seed(args.seed)
    policy = copy.deepcopy(model)
    config = GRPOConfig(
        output_dir="outputs/clipped_batch_probe",
        learning_rate=5e-5,
        lr_scheduler_type="constant",
        max_steps=args.steps,
        num_iterations=2,
        num_generations=preset.num_generations,
        per_device_train_batch_size=args.batch,
        max_completion_length=preset.max_completion_length,
        beta=0.0,
        loss_type="grpo",  # the notebook's GRPO run; TRL 1.16's default is "dapo"
        bf16=preset.bf16,
        use_cpu=hardware.kind == "cpu",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        seed=args.seed,
        disable_tqdm=True,
    )
    reward = make_length_reward(TARGET_CHARS, max_completion_length=preset.max_completion_length)
    trainer = GRPOTrainer(
        model=policy, reward_funcs=reward, args=config, train_dataset=data["train"], processing_class=tokenizer
    )
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    seconds = time.perf_counter() - start
    key = "completions/clipped_ratio"
    clipped = [row[key] for row in trainer.state.log_history if key in row]
    print(
        f"seed {args.seed}, {args.steps} steps of {args.batch} completions, {seconds:.1f} s of training: "
        "clipped share per sampled batch " + ", ".join(f"{share:.3f}" for share in clipped)
    )
    print(f"held-out length error {before:.1f} -> {error(policy):.1f} (lower is better)")


if __name__ == "__main__":
    main()
