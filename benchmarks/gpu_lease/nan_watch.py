"""Notebook 01's GRPO recipe as a script that says where a NaN gradient first appears.

    python benchmarks/gpu_lease/nan_watch.py MODE [--lr 1e-5] [--preset gpu] [--steps N]

MODE: ``watch`` (bf16 autocast, sdpa attention), ``eager`` (bf16, eager attention), ``fp32`` (no autocast) or
``anomaly`` (bf16 with ``torch.autograd.set_detect_anomaly``: slow). Every mode prints each step's loss, gradient
norm, KL and reward, names the parameters whose gradients are not finite before an optimizer step, and (``watch``
and ``eager``) the first layer whose forward output is not finite. On an H100 (2026-11-27, run beside four
others after ``setup.sh``, with ``run.sh``'s environment) ``watch`` at lr 1e-5 logged a finite loss and a NaN
gradient norm at step 15; ``fp32`` ran its 40 steps clean in 79 s (docs/BENCHMARKS.md, "Third lease").
"""

from __future__ import annotations

import argparse
import re
import time
import traceback

import torch
from transformers import TrainerCallback, set_seed
from trl import GRPOConfig, GRPOTrainer

from course_utils.data import length_prompts
from course_utils.hardware import detect_hardware
from course_utils.models import load_model
from course_utils.presets import get_preset
from course_utils.rewards import make_length_reward

LAYERS = re.compile(r"model\.layers\.\d+(\.self_attn|\.mlp)?|model\.norm|model\.embed_tokens|lm_head")


class NonFiniteWatch(TrainerCallback):
    """Print each step's numbers, and the parameters whose gradients are not finite before the optimizer step."""

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        bad = [n for n, p in model.named_parameters() if p.grad is not None and not torch.isfinite(p.grad).all()]
        if bad:
            print(f"step {state.global_step + 1}: non-finite gradients in {len(bad)} tensors, first {bad[:3]}")

    def on_log(self, args, state, control, logs=None, **kwargs):
        keys = ("loss", "grad_norm", "kl", "reward", "completions/mean_length", "entropy")
        print(state.global_step, {k: round(logs[k], 4) for k in keys if k in (logs or {})}, flush=True)


def watch_forward(model: torch.nn.Module) -> None:
    """Print the first layer whose forward output holds a NaN or an inf (one sync per layer: slower)."""
    seen: list[str] = []

    def hook(name):
        def check(module, inputs, output):
            out = output[0] if isinstance(output, tuple) else output
            if torch.is_tensor(out) and not seen and not torch.isfinite(out).all():
                seen.append(name)
                print(f"non-finite forward output in {name}, training={module.training}, {out.dtype}", flush=True)

        return check

    for name, module in model.named_modules():
        if LAYERS.fullmatch(name):
            module.register_forward_hook(hook(name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["watch", "eager", "fp32", "anomaly"])
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--preset", default="gpu")
    parser.add_argument("--steps", type=int, default=0, help="default: the preset's")
    args = parser.parse_args()
    set_seed(0)
    hardware = detect_hardware()
    P = get_preset(args.preset, hardware)
    data = length_prompts(seed=0, n_test=P.n_eval, system_prompt="Answer in one short sentence.")
    model, tokenizer = load_model("auto", hardware=hardware, verbose=False)
    if args.mode == "eager":
        model.set_attn_implementation("eager")
    if args.mode in ("watch", "eager"):
        watch_forward(model)
    torch.autograd.set_detect_anomaly(args.mode == "anomaly")
    config = GRPOConfig(
        output_dir=f"/tmp/nan_watch-{args.mode}", learning_rate=args.lr, lr_scheduler_type="constant",
        max_steps=args.steps or P.max_steps, num_generations=P.num_generations,
        per_device_train_batch_size=P.per_device_train_batch_size, max_completion_length=P.max_completion_length,
        beta=0.04, bf16=args.mode != "fp32" and hardware.bf16, logging_steps=1, save_strategy="no",
        report_to="none", seed=0, disable_tqdm=True,
    )  # fmt: skip
    reward = make_length_reward(50, max_completion_length=P.max_completion_length)
    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=config, train_dataset=data["train"],
                          processing_class=tokenizer, callbacks=[NonFiniteWatch()])  # fmt: skip
    start = time.time()
    try:
        trainer.train()
        print(f"{args.mode} lr {args.lr}: {config.max_steps} steps in {time.time() - start:.0f} s, no error")
    except Exception as error:  # the CUDA assert ends the run: report where, then the tail of the traceback
        print(f"{args.mode} lr {args.lr}: {type(error).__name__} at step {trainer.state.global_step}: {error}")
        traceback.print_exc(limit=-6)


if __name__ == "__main__":
    main()
