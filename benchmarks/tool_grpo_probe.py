#!/usr/bin/env python
"""Notebook 10's recipe search: a call-format warm start, then GRPO with the calculator, measured step by step.

    python benchmarks/tool_grpo_probe.py [--warm-start-steps 2] [--steps 8] [--batch 8] [--generations 4]

The warm start is ``SFTTrainer`` on ``tool_call_examples`` (the call only, never the answer). Then
``GRPOTrainer(tools=[calculator])`` with ``max_tool_calling_iterations=1`` and the rewards of
``course_utils.tools`` (answer 1.0, well-formed call 0.2, failed call 0.2). Held-out rollouts are greedy
(``tool_rollouts``), before and after GRPO; each GRPO step prints its rewards, the tool metrics TRL logs,
the entropy and TRL's ``step_time``. "number in last turn" counts final messages holding the right number
anywhere, so that an answer in the wrong wrapper shows apart from a wrong answer.

This is a probe, not the lesson: notebook 10 is not written yet (issue 20). Measured with it on the 2-core
machine (embedded SmolLM2-135M-Instruct, float32, seed 0, 40 held-out questions; 2026-11-24):

    defaults (warm start 2 steps, temperature 1.0):
        warm start: calls 0.225, accuracy 0, its answers echo the reply ("<tool_response>\n174\n</")
        after 8 GRPO steps: calls 1.000, accuracy 0.000, number in last turn 0.350
    --temperature 0.7: sampled calls 0.125 -> 1.0 by step 4; answer_reward 0 on all 64 rollouts;
        after 8 steps: calls 1.000, accuracy 0.000, number in last turn 0.000 ("<tool_response>\n<tool_name>...")
    --warm-start-steps 1: no call in greedy rollouts nor in the first 16 samples (no signal; stopped)
    each GRPO step 32-42 s (8 completions; the prompt with the tool's schema is 275 tokens); warm start ~30 s/step

So GRPO learns to call within a few steps, but never samples the bare number after the reply, and the answer
reward stays flat: the recipe needs another source of answer signal before notebook 10 can be written.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def report(label: str, rollouts: list, answers: list[str], seconds: float) -> None:
    from course_utils.tools import tool_use_report

    shares = tool_use_report(rollouts, answers)
    last = [str(r[-1].get("content", "")) if len(r) > 1 else "" for r in rollouts]
    shares["number in last turn"] = sum(a in t for t, a in zip(last, answers, strict=True)) / len(answers)
    print(f"{label}: " + ", ".join(f"{k} {v:.3f}" for k, v in shares.items()) + f" ({seconds:.0f} s)")
    print(f"    first rollout: {rollouts[0]}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm-start-examples", type=int, default=16)
    parser.add_argument("--warm-start-steps", type=int, default=2)
    parser.add_argument("--steps", type=int, default=8, help="GRPO steps (0: the warm start alone)")
    parser.add_argument("--batch", type=int, default=8, help="completions per step")
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=48)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--n-eval", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer, SFTConfig, SFTTrainer

    from course_utils.models import load_model
    from course_utils.tools import (
        answer_reward,
        calculator,
        calculator_problems,
        failed_call_penalty,
        tool_call_examples,
        tool_rollouts,
        use_tool_chat_template,
        wellformed_call_reward,
    )

    model, tokenizer = load_model("auto", verbose=False)
    use_tool_chat_template(tokenizer)
    data = calculator_problems(n_train=200, n_test=args.n_eval, seed=args.seed)
    test = data["test"]

    start = time.perf_counter()
    examples = tool_call_examples(data["train"], args.warm_start_examples)
    sft = SFTTrainer(
        model=model, processing_class=tokenizer, train_dataset=examples,
        args=SFTConfig(output_dir="outputs/probe/sft", max_steps=args.warm_start_steps, per_device_train_batch_size=8,
                       learning_rate=3e-5, lr_scheduler_type="constant", logging_steps=1, save_strategy="no",
                       report_to="none", seed=args.seed, disable_tqdm=True, bf16=False),
    )  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        sft.train()
    print(f"warm start: {args.warm_start_steps} steps in {time.perf_counter() - start:.0f} s")
    start = time.perf_counter()
    report("warm start", tool_rollouts(model, tokenizer, test["prompt"]), test["answer"], time.perf_counter() - start)
    if not args.steps:
        return 0

    class PrintSteps(TrainerCallback):
        keys = ("rewards/answer_reward/mean", "rewards/wellformed_call_reward/mean", "tools/call_frequency",
                "tools/failure_frequency", "entropy", "step_time")  # fmt: skip

        def on_log(self, _args, state, control, logs=None, **kwargs):
            if logs and "step_time" in logs:
                line = f"step {state.global_step}: " + ", ".join(f"{k} {logs[k]:.3g}" for k in self.keys)
                print(line, file=sys.__stdout__, flush=True)  # past the redirect around trainer.train()

    config = GRPOConfig(
        output_dir="outputs/probe/grpo", max_steps=args.steps, per_device_train_batch_size=args.batch,
        num_generations=args.generations, max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=1, learning_rate=args.learning_rate, lr_scheduler_type="constant", beta=0.0,
        temperature=args.temperature, reward_weights=[1.0, 0.2, 0.2], logging_steps=1, save_strategy="no",
        report_to="none", bf16=False, seed=args.seed, disable_tqdm=True,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model, reward_funcs=[answer_reward, wellformed_call_reward, failed_call_penalty], args=config,
        train_dataset=data["train"], processing_class=tokenizer, tools=[calculator], callbacks=[PrintSteps()],
    )  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):  # TRL's own log lines; PrintSteps prints the ones that matter
        trainer.train()
    start = time.perf_counter()
    report("after GRPO", tool_rollouts(model, tokenizer, test["prompt"]), test["answer"], time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
