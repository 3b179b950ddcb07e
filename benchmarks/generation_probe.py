#!/usr/bin/env python
"""Where generation time goes: sampling 32 tokens for a batch of chat prompts, by batch size and precision.

    python benchmarks/generation_probe.py [--batches 16 32 64] [--tokens 32]

Generation is the largest single share of a GRPO step on a CPU (see docs/BENCHMARKS.md). This probe times
``model.generate`` alone, as TRL calls it (sampling at temperature 1, no top-k), for several batch sizes, in
float32 and under bfloat16 autocast, and prints seconds per 16 completions, so the effect of batching more
completions per call and of the precision can be read without a trainer around them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def table(batches: tuple[int, ...] = (16, 32, 64), tokens: int = 32) -> list[str]:
    """The markdown table (header and a row per batch size and precision) of sampling ``tokens`` tokens."""
    import torch

    from course_utils.models import load_model

    model, tokenizer = load_model("auto", verbose=False)
    model.eval()
    tokenizer.padding_side = "left"
    device = next(model.parameters()).device
    warm = tokenizer.apply_chat_template([[{"role": "user", "content": "Hi"}]], add_generation_prompt=True,
                                         return_tensors="pt", return_dict=True).to(device)  # fmt: skip
    model.generate(**warm, max_new_tokens=2, do_sample=False, pad_token_id=tokenizer.pad_token_id)  # warm-up
    lines = ["| completions per call | precision | seconds | seconds per 16 completions |", "|---|---|---|---|"]
    for batch in batches:
        question = "Tell me about topic number {} in one sentence."
        prompts = [[{"role": "user", "content": question.format(i)}] for i in range(batch)]
        inputs = tokenizer.apply_chat_template(
            prompts, add_generation_prompt=True, return_tensors="pt", padding=True, return_dict=True
        ).to(device)
        for precision in ("float32", "bf16 autocast"):
            torch.manual_seed(0)
            start = time.perf_counter()
            with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision != "float32"):
                model.generate(
                    **inputs,
                    max_new_tokens=tokens,
                    min_new_tokens=tokens,
                    do_sample=True,
                    temperature=1.0,
                    top_k=0,
                    pad_token_id=tokenizer.pad_token_id,
                )
            seconds = time.perf_counter() - start
            lines.append(f"| {batch} | {precision} | {seconds:.2f} | {seconds / batch * 16:.2f} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args(argv)

    from course_utils.hardware import describe_environment

    print(describe_environment())
    print(f"{args.tokens} new tokens per completion, sampling at temperature 1.0 (TRL's generation settings)")
    print("\n".join(table(tuple(args.batches), args.tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
