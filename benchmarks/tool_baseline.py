#!/usr/bin/env python
"""What the course model does with a calculator before any training (the starting point of notebook 10).

    python benchmarks/tool_baseline.py [--n 40] [--tokens 48] [--seed 0]

Greedy, on the held-out questions of ``course_utils.tools.calculator_problems`` (half two-digit additions,
half two-digit times one-digit), with the ChatML tool template of ``use_tool_chat_template``. Three
conditions, each one batched ``generate`` call:

* ``no tool``: the baseline's prompt (answer with only the number); exact accuracy, and how often the
  number appears anywhere in the reply;
* ``tool offered``: the calculator's schema in the system prompt; the share of replies with a call TRL parses,
  with a call that runs, with a call that computes the right value, and with a ``<tool_call>`` left unparsed;
* ``after the tool's reply``: the conversation already holds the right call and the calculator's reply; exact
  accuracy of the next turn (does the model use the result?).

Parsing is TRL's own (``trl.chat_template_utils.parse_response``), as in ``GRPOTrainer``. "Number anywhere"
counts only what fits in ``--answer-tokens`` (16): a reply that works its way to the sum is cut off first.

The numbers below were measured with TRL's Qwen2.5 template verbatim (before 2026-11-29, the equivalent of
``use_tool_chat_template(tokenizer, compact=False)``); the script now uses the compact template, as notebook 10
does, so a rerun differs.

Measured (embedded SmolLM2-135M-Instruct Q4_1 dequantized to float32, transformers 5.23, TRL 1.16, defaults:
40 questions, seed 0; about 90 s of one CPU core for the three conditions):

    no tool:      exact 0/40, number anywhere 0/40 (it starts "To solve this problem, we need to add ...")
    tool offered: a parsed call 0/40, any "<tool_call>" at all 0/40 (it answers in prose, ignoring the tool)
    after reply:  exact 21/40 (0.525), number anywhere 31/40 (0.775)

So the course model never calls the tool unprompted (GRPO would get no signal for calling: a warm start is
needed), and already copies the calculator's reply as its answer about half the time.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _generate(model, tokenizer, conversations, tools, max_new_tokens):
    """Greedy completions (token ids, cut after the first end of turn) and the rendered prompts' ids.

    The prompts share a long prefix (the system prompt and the tool's schema): it is run through the model
    once and its cache copied to every row, and rows of equal length are generated together without padding.
    On a tiny Llama this gives the same tokens as plain batched ``generate``; here it saves most of the CPU.
    """
    import copy

    import torch
    from transformers import DynamicCache

    prompt_ids = [
        tokenizer.apply_chat_template(c, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False)
        for c in conversations
    ]
    shared = min(len(p) for p in prompt_ids) - 1
    for p in prompt_ids:
        shared = next((i for i in range(shared) if p[i] != prompt_ids[0][i]), shared)
    completions: list[list[int]] = [[] for _ in prompt_ids]
    with torch.no_grad():
        prefix_cache = DynamicCache(config=model.config)
        model(input_ids=torch.tensor([prompt_ids[0][:shared]]), past_key_values=prefix_cache, use_cache=True)
        for length in sorted({len(p) for p in prompt_ids}):
            rows = [i for i, p in enumerate(prompt_ids) if len(p) == length]
            cache = copy.deepcopy(prefix_cache)
            cache.batch_repeat_interleave(len(rows))
            input_ids = torch.tensor([prompt_ids[i] for i in rows])
            out = model.generate(
                input_ids=input_ids, attention_mask=torch.ones_like(input_ids), past_key_values=cache,
                max_new_tokens=max_new_tokens, do_sample=False, temperature=None, top_p=None, top_k=None,
                pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
            )  # fmt: skip
            for i, row in zip(rows, out[:, length:].tolist(), strict=True):
                eos = tokenizer.eos_token_id
                completions[i] = row[: row.index(eos) + 1] if eos in row else row
    return prompt_ids, completions


def measure(n: int = 40, max_new_tokens: int = 48, seed: int = 0, answer_tokens: int = 16) -> dict[str, float]:
    """The rates of the module docstring; each condition's are printed as soon as it is done."""
    import torch
    from trl.chat_template_utils import parse_response

    from course_utils.models import load_model
    from course_utils.rewards import parse_number
    from course_utils.tools import (
        NO_TOOL_SYSTEM_PROMPT,
        _unparsed_calls,
        calculator,
        calculator_problems,
        call_fails,
        use_tool_chat_template,
    )

    model, tokenizer = load_model("auto", verbose=False)
    model.eval()
    torch.set_num_threads(1)  # share the machine: one core, and no threads spinning while waiting for it
    use_tool_chat_template(tokenizer)
    rows = calculator_problems(n_train=0, n_test=n, seed=seed)["test"]
    answers = [float(a) for a in rows["answer"]]
    results: dict[str, float] = {}
    cpu = time.process_time()

    def report(condition: str, example: str) -> None:
        print(f"--- {condition}; first question {rows['question'][0]!r}, reply {example!r}")
        for name, value in results.items():
            if name.startswith(condition.split(":")[0]):
                print(f"    {name:40s} {value:.3f}")
        print(f"    cpu seconds so far {time.process_time() - cpu:.0f}", flush=True)

    # 1. No tool: the same questions, the baseline's system prompt.
    plain = [[{"role": "system", "content": NO_TOOL_SYSTEM_PROMPT}, p[-1]] for p in rows["prompt"]]
    _, ids = _generate(model, tokenizer, plain, None, answer_tokens)
    texts = [tokenizer.decode(i, skip_special_tokens=True).strip() for i in ids]
    results["no tool: exact"] = sum(parse_number(t) == a for t, a in zip(texts, answers, strict=True)) / n
    results["no tool: number anywhere"] = sum(str(int(a)) in t for t, a in zip(texts, answers, strict=True)) / n
    report("no tool", texts[0])

    # 2. The calculator offered in the system prompt (the tool prompt of calculator_problems).
    prompt_ids, ids = _generate(model, tokenizer, rows["prompt"], [calculator], max_new_tokens)
    parsed = [parse_response(tokenizer, c, prefix=p, tools=[calculator]) for p, c in zip(prompt_ids, ids, strict=True)]
    calls = [[c["function"] for c in m.get("tool_calls") or []] for m in parsed]
    results["tool: parsed call"] = sum(bool(c) for c in calls) / n
    results["tool: call runs"] = sum(bool(c) and not any(call_fails(x) for x in c) for c in calls) / n
    right = 0
    for c, a in zip(calls, answers, strict=True):
        if c and not call_fails(c[0]) and parse_number(calculator(**c[0]["arguments"])) == a:
            right += 1
    results["tool: call computes the answer"] = right / n
    results["tool: <tool_call> left unparsed"] = sum(_unparsed_calls([m]) > 0 for m in parsed) / n
    results["tool: exact answer without a call"] = (
        sum(not c and parse_number(m["content"]) == a for m, c, a in zip(parsed, calls, answers, strict=True)) / n
    )
    report("tool", tokenizer.decode(ids[0]))

    # 3. After the right call and the calculator's reply: is the result used?
    after = []
    for prompt, expression in zip(rows["prompt"], rows["expression"], strict=True):
        call = {"type": "function", "function": {"name": "calculator", "arguments": {"expression": expression}}}
        after.append([*prompt, {"role": "assistant", "content": "", "tool_calls": [call]},
                      {"role": "tool", "name": "calculator", "content": calculator(expression)}])  # fmt: skip
    _, ids = _generate(model, tokenizer, after, [calculator], answer_tokens)
    texts = [tokenizer.decode(i, skip_special_tokens=True).strip() for i in ids]
    results["after reply: exact"] = sum(parse_number(t) == a for t, a in zip(texts, answers, strict=True)) / n
    results["after reply: number anywhere"] = sum(str(int(a)) in t for t, a in zip(texts, answers, strict=True)) / n
    report("after reply", texts[0])
    results["cpu seconds"] = time.process_time() - cpu
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40, help="held-out questions (half +, half *)")
    parser.add_argument("--tokens", type=int, default=48, help="max_new_tokens when the tool is offered")
    parser.add_argument("--answer-tokens", type=int, default=16, help="max_new_tokens, number-only replies")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    measure(args.n, args.tokens, args.seed, args.answer_tokens)
    return 0


if __name__ == "__main__":
    sys.exit(main())
