#!/usr/bin/env python
"""Where generation time goes: sampling 32 tokens for a batch of chat prompts, by batch size and precision.

    python benchmarks/generation_probe.py [--batches 16 32 64] [--tokens 32] [--levers]

Generation is the largest single share of a GRPO step on a CPU (see docs/BENCHMARKS.md). This probe times
``model.generate`` alone, as TRL calls it (sampling at temperature 1, no top-k), for several batch sizes, in
float32 and under bfloat16 autocast, and prints seconds per 16 completions, so the effect of batching more
completions per call and of the precision can be read without a trainer around them.

Each row also shows how far generation is from this machine's limit. A decoding step must read every
weight once (memory) and do 2 x parameters x batch floating-point operations (compute); the probe measures
the machine's read bandwidth and float32 matrix-product rate, and the bound is the batch divided by the
slower of the two times. It is an upper bound: it ignores the KV cache, attention and sampling.

``--levers`` adds the generation levers of issue 17, one at a time against TRL's sampling in float32: sampling
from the 50 likeliest tokens (``top_k=50``) instead of the full 49,152-token vocabulary, the static KV cache,
and the static cache with the decoding step compiled by ``torch.compile`` (its first call, which compiles, and
a later one).

``--profile`` asks where one call's time goes: the largest operators of a ``torch.profiler`` trace, and the
rate of each of the model's matrix products at the shape decoding gives it (one row per completion), so the
float32 rate of the 2048 x 2048 product above can be compared with what these small products reach.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def chat_batch(tokenizer, batch: int, device):
    """``batch`` different one-sentence questions as chat prompts, left-padded and tokenized on ``device``."""
    question = "Tell me about topic number {} in one sentence."
    prompts = [[{"role": "user", "content": question.format(i)}] for i in range(batch)]
    return tokenizer.apply_chat_template(
        prompts, add_generation_prompt=True, return_tensors="pt", padding=True, return_dict=True
    ).to(device)


def _best_seconds(work, repeats: int) -> float:
    """The fastest of ``repeats`` timed calls of ``work``, after one untimed call."""
    work()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def read_bandwidth_gb_s(megabytes: int = 512, repeats: int = 3) -> float:
    """Memory read bandwidth, GB/s (1e9 bytes): summing a float32 tensor far larger than the caches."""
    import torch

    x = torch.ones(megabytes * 2**20 // 4)
    return x.numel() * 4 / _best_seconds(x.sum, repeats) / 1e9


def matmul_gflops(n: int = 2048, repeats: int = 3) -> float:
    """float32 matrix-product rate, GFLOP/s: an n x n product takes 2 n**3 operations."""
    import torch

    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / _best_seconds(lambda: a @ b, repeats) / 1e9


def decode_bound_tokens_per_second(weight_bytes: float, parameters: float, batch: int, bandwidth_gb_s: float,
                                   gflops: float) -> float:  # fmt: skip
    """At most this many tokens a second: each step reads the weights once and computes 2 x parameters x batch.

    >>> round(decode_bound_tokens_per_second(540e6, 135e6, 16, 10.0, 100.0))  # memory: 54 ms a step; compute: 43 ms
    296
    """
    step_seconds = max(weight_bytes / (bandwidth_gb_s * 1e9), 2 * parameters * batch / (gflops * 1e9))
    return batch / step_seconds


def table(batches: tuple[int, ...] = (16, 32, 64), tokens: int = 32) -> list[str]:
    """A line with the machine's measured limits, then the markdown table (a row per batch size and
    precision) of sampling ``tokens`` tokens, with tokens per second against the bound."""
    import torch

    bandwidth, gflops = read_bandwidth_gb_s(), matmul_gflops()
    model, tokenizer = _course_model()
    parameters = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    device = next(model.parameters()).device
    warm = tokenizer.apply_chat_template([[{"role": "user", "content": "Hi"}]], add_generation_prompt=True,
                                         return_tensors="pt", return_dict=True).to(device)  # fmt: skip
    model.generate(**warm, max_new_tokens=2, do_sample=False, pad_token_id=tokenizer.pad_token_id)  # warm-up
    lines = [
        f"Measured limits of this machine ({torch.get_num_threads()} threads): read bandwidth {bandwidth:.1f} GB/s, "
        f"float32 matrix products {gflops:.0f} GFLOP/s; weights {weight_bytes / 1e9:.2f} GB ({parameters / 1e6:.0f}M "
        "parameters). Bound: the float32 limits for both precisions.",
        "",
        "| completions per call | precision | seconds | seconds per 16 completions | tokens/s | bound, tokens/s "
        "| share of the bound |",
        "|---|---|---|---|---|---|---|",
    ]
    for batch in batches:
        inputs = chat_batch(tokenizer, batch, device)
        for precision in ("float32", "bf16 autocast"):
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision != "float32"):
                seconds = _timed_generate(model, inputs, tokens, pad_token_id=tokenizer.pad_token_id)
            rate = batch * tokens / seconds
            bound = decode_bound_tokens_per_second(weight_bytes, parameters, batch, bandwidth, gflops)
            lines.append(f"| {batch} | {precision} | {seconds:.2f} | {seconds / batch * 16:.2f} | {rate:.0f} | "
                         f"{bound:.0f} | {rate / bound:.0%} |")  # fmt: skip
    return lines


def _course_model():
    """The course model in eval mode, with its tokenizer padding on the left as TRL's generation does."""
    from course_utils.models import load_model

    model, tokenizer = load_model("auto", verbose=False)
    model.eval()
    tokenizer.padding_side = "left"
    return model, tokenizer


def _timed_generate(model, inputs, tokens: int, **settings) -> float:
    """Seconds to sample ``tokens`` new tokens per prompt at temperature 1 (TRL's settings, unless overridden)."""
    import torch

    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.no_grad():
        model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, temperature=1.0,
                       **{"top_k": 0, **settings})  # fmt: skip
    return time.perf_counter() - start


def levers_table(batches: tuple[int, ...] = (16, 64), tokens: int = 32) -> list[str]:
    """A row per batch and generation lever, float32: seconds, and the speed against TRL's sampling."""
    from transformers import CompileConfig

    model, tokenizer = _course_model()
    compiled = CompileConfig(mode="default")
    compiled._compile_all_devices = True  # transformers compiles on GPUs only unless told (generation/utils.py)
    levers = {
        "top_k=50": {"top_k": 50},
        "static KV cache": {"cache_implementation": "static"},
        "static KV cache + torch.compile, first call": {"cache_implementation": "static", "compile_config": compiled},
        "static KV cache + torch.compile, later call": {"cache_implementation": "static", "compile_config": compiled},
    }
    lines = ["| completions per call | lever | seconds | × TRL's sampling |", "|---|---|---|---|"]
    for batch in batches:
        inputs = chat_batch(tokenizer, batch, model.device)
        settings = {"pad_token_id": tokenizer.pad_token_id}
        _timed_generate(model, inputs, 2, **settings)  # warm-up
        base = _timed_generate(model, inputs, tokens, **settings)
        lines.append(f"| {batch} | none: full vocabulary (top_k=0), dynamic cache | {base:.2f} | 1.00× |")
        for lever, extra in levers.items():
            try:
                seconds = _timed_generate(model, inputs, tokens, **settings, **extra)
            except Exception as error:  # a lever this machine cannot run is reported, not fatal
                lines.append(f"| {batch} | {lever} | failed: {type(error).__name__}: {str(error)[:80]} | – |")
                continue
            lines.append(f"| {batch} | {lever} | {seconds:.2f} | {base / seconds:.2f}× |")
    return lines


def profile_lines(batch: int = 16, tokens: int = 32, top: int = 8) -> list[str]:
    """One sampling call under ``torch.profiler`` (its largest operators), then each distinct matrix product of
    the model at decoding's shape (``batch`` rows): milliseconds, GFLOP/s and weight GB/s."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    model, tokenizer = _course_model()
    inputs = chat_batch(tokenizer, batch, model.device)
    settings = {"pad_token_id": tokenizer.pad_token_id}
    _timed_generate(model, inputs, 2, **settings)  # warm-up
    with profile(activities=[ProfilerActivity.CPU]) as trace:
        seconds = _timed_generate(model, inputs, tokens, **settings)
    events = sorted(trace.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events)
    lines = [
        f"One call, {batch} completions x {tokens} tokens, prompts of {inputs['input_ids'].shape[1]} tokens: "
        f"{seconds:.2f} s",
        "",
        "| operator | share of the call | seconds | calls |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{e.key}` | {e.self_cpu_time_total / total:.0%} | {e.self_cpu_time_total / 1e6:.2f} | {e.count} |"
        for e in events[:top]
    ]
    shapes = Counter(  # (in, out) -> how many layers have that product, the LM head included
        (m.in_features, m.out_features) for m in model.modules() if isinstance(m, torch.nn.Linear)
    )
    lines += [
        "",
        f"| matrix product ({batch} rows) | how many per token | ms | GFLOP/s | weight GB/s |",
        "|---|---|---|---|---|",
    ]
    step_ms = 0.0
    for (inner, outer), count in shapes.items():
        x, weight = torch.randn(batch, inner), torch.randn(outer, inner)
        ms = _best_seconds(lambda: torch.nn.functional.linear(x, weight), 20) * 1e3  # noqa: B023
        step_ms += ms * count
        lines.append(f"| {inner} x {outer} | {count} | {ms:.3f} | {2 * batch * inner * outer / ms / 1e6:.0f} | "
                     f"{inner * outer * 4 / ms / 1e6:.1f} |")  # fmt: skip
    lines.append(
        f"\nThose products alone take {step_ms:.1f} ms per decoding step of {batch} completions "
        f"({step_ms * tokens / 1e3:.2f} s for {tokens} tokens, before the prompt's pass)."
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 32, 64])
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--levers", action="store_true", help="also time top_k=50, the static cache, torch.compile")
    parser.add_argument("--profile", action="store_true", help="only profile one call at the first batch size")
    args = parser.parse_args(argv)

    from course_utils.hardware import describe_environment

    print(describe_environment())
    print(f"{args.tokens} new tokens per completion, sampling at temperature 1.0 (TRL's generation settings)")
    if args.profile:
        print("\n".join(profile_lines(args.batches[0], args.tokens)))
        return 0
    print("\n".join(table(tuple(args.batches), args.tokens)))
    if args.levers:
        print("\nGeneration levers, float32, one at a time:")
        print("\n".join(levers_table(tuple(args.batches), args.tokens)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
