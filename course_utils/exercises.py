"""Check cells for the exercises whose answer is code.

Each ``check_*`` function runs the learner's function on cases with known answers and returns an
:class:`ExerciseResult`: what passed, or the first case that did not, with a hint. A check never raises
on a wrong answer, so a notebook keeps running while an exercise is still open (and CI runs the
unsolved stubs). The reference solutions are in ``notebooks/solutions/``; ``tests/test_exercises.py``
runs every check against them and against typical wrong answers.
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ExerciseResult:
    """The outcome of one check cell: ``passed`` and a message saying why."""

    exercise: str
    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        mark = "✔ solved" if self.passed else "✘ not yet"
        return f"{self.exercise}: {mark}. {self.message}"


def _chat(text: str) -> list[dict[str, str]]:
    """One completion in the conversational shape TRL passes to reward functions."""
    return [{"role": "assistant", "content": text}]


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[list[float] | None, str]:
    """Call a learner's reward function; ``(scores, "")`` or ``(None, what went wrong)``."""
    try:
        scores = fn(*args, **kwargs)
    except Exception as error:  # the learner's code: report it, do not stop the notebook
        return None, f"calling it raised {type(error).__name__}: {error}"
    n = len(args[0])
    if not isinstance(scores, (list, tuple)) or len(scores) != n:
        return None, f"a reward function returns one number per completion: {n} completions gave {scores!r}"
    if not all(isinstance(s, (int, float)) and math.isfinite(s) for s in scores):
        return None, f"every reward must be a finite number (int or float); got {list(scores)!r}"
    return list(scores), ""


# --------------------------------------------------------------------------------------------- notebook 01
TOPIC_CASES = [  # (topic, an answer about it, an answer that ignores it)
    ("coffee", "Coffee is brewed from roasted beans.", "I am ready with a short answer in one sentence."),
    ("the ocean", "The ocean covers most of our planet.", "Here is a short and friendly sentence for you."),
    ("chess", "Chess is a board game for two players.", "That is a very good question to ask."),
]


def check_topic_reward(topic_reward: Callable[..., list[float]]) -> ExerciseResult:
    """Notebook 01, exercise 5: ``topic_reward(completions, topic, **kwargs)`` pays answers that mention
    their prompt's topic more than answers that ignore it, position by position."""
    name = "Notebook 01, exercise 5 (topic_reward)"
    topics = [t for t, _, _ in TOPIC_CASES] * 2
    completions = [_chat(on) for _, on, _ in TOPIC_CASES] + [_chat(off) for _, _, off in TOPIC_CASES]
    trl_columns = dict(prompts=[[]] * len(topics), completion_ids=[[0]] * len(topics))  # also passed by TRL
    scores, problem = _call(topic_reward, completions, topic=topics, **trl_columns)
    if scores is None:
        return ExerciseResult(name, False, problem + " (TRL also passes prompts, completion_ids, ...: keep **kwargs)")
    n = len(TOPIC_CASES)
    for i, (topic, on, off) in enumerate(TOPIC_CASES):
        if not scores[i] > scores[n + i]:
            return ExerciseResult(
                name,
                False,
                f"for topic {topic!r}, {on!r} scored {scores[i]} and {off!r} scored {scores[n + i]}: the answer "
                "about the topic must score more. Compare each completion with its own topic "
                "(zip(completions, topic)), in lower case.",
            )
    swapped, problem = _call(topic_reward, completions[::-1], topic=topics[::-1], **trl_columns)
    if swapped is None or swapped != scores[::-1]:
        return ExerciseResult(
            name, False, "reversing the batch changed the scores: each completion must be judged by its own topic."
        )
    return ExerciseResult(
        name, True, f"answers about their topic score {scores[0]}, answers that ignore it {scores[n]}."
    )  # fmt: skip


# --------------------------------------------------------------------------------------------- notebook 02
ANSWER_CASES = [  # (completion text, its answer, the reward it earns, why)
    ("<reasoning>\n4 plus 7 equals 11.\n</reasoning>\n<answer>\n11\n</answer>", "11", 1.0, "right, one answer"),
    ("<reasoning>\n4 plus 7 equals 12.\n</reasoning>\n<answer>\n12\n</answer>", "11", 0.0, "wrong"),
    ("<answer>10</answer><answer>12</answer><answer>11</answer>", "11", 0.0, "three answers, the last one right"),
    ("Sure! The sum is easy. <answer>11</answer>", "11", 1.0, "one answer after free text: format is not its job"),
    ("<reasoning>\n2 plus 3.\n</reasoning>\n<answer>5</answer>", "5", 1.0, "right, another question's answer"),
    ("<reasoning>\n9 plus 9.\n</reasoning>\n<answer>18.0</answer>", "18", 1.0, "18.0 is the number 18"),
    ("<reasoning>\nclose to 11.\n</reasoning>\n<answer>11 or 12</answer>", "11", 0.0, "a hedge"),
    ("11", "11", 0.0, "no answer tags"),
]


def check_single_answer_reward(single_answer_reward: Callable[..., list[float]]) -> ExerciseResult:
    """Notebook 02, exercise 6: ``single_answer_reward(completions, answer, **kwargs)`` pays 1.0 for a correct
    answer as ``correctness_reward`` does, but only when the completion has exactly one ``<answer>`` block."""
    name = "Notebook 02, exercise 6 (single_answer_reward)"
    completions = [_chat(text) for text, *_ in ANSWER_CASES]
    answers = [answer for _, answer, *_ in ANSWER_CASES]
    expected = [reward for *_, reward, _ in ANSWER_CASES]
    scores, problem = _call(single_answer_reward, completions, answer=answers, prompts=[[]] * len(completions),
                            completion_ids=[[0]] * len(completions))  # fmt: skip
    if scores is None:
        if "keyword argument" in problem:
            problem += " (TRL passes prompts, completion_ids and every dataset column: keep **kwargs)"
        return ExerciseResult(name, False, problem)
    for (text, answer, reward, why), got in zip(ANSWER_CASES, scores, strict=True):
        if got == reward:
            continue
        if why.startswith("three answers"):
            hint = "count the <answer> blocks first: more than one earns nothing, however the last one reads"
        elif why == "18.0 is the number 18":
            hint = "compare numbers, not strings: parse_number(extract_answer(text)) against parse_number(answer)"
        elif why.startswith("right, another"):
            hint = "compare each completion with its own answer, answer[i]"
        else:
            hint = f"{why}; start from correctness_reward's comparison, then count the <answer> blocks"
        return ExerciseResult(name, False, f"{text!r} (answer {answer}) scored {got}, expected {reward}: {hint}.")
    return ExerciseResult(name, True, f"{expected.count(1.0)} paid, {expected.count(0.0)} refused, including "
                                      "three answer tags whose last one is right.")  # fmt: skip


# --------------------------------------------------------------------------------------------- notebook 03
GROUP_CASES = [(8, 1), (6, 1), (5, 1), (4, 4), (12, 2)]  # (per_device_train_batch_size, gradient_accumulation_steps)


def trl_group_sizes(per_device_train_batch_size: int, gradient_accumulation_steps: int = 1) -> list[int]:
    """The ``num_generations`` values TRL's ``GRPOConfig`` accepts for a batch, found by asking it.

    >>> trl_group_sizes(4, 4)  # 4 x 4 = 16 completions per generation: groups of 2, 4, 8 or 16
    [2, 4, 8, 16]
    """
    from trl import GRPOConfig

    accepted = []
    for num_generations in range(1, per_device_train_batch_size * gradient_accumulation_steps + 1):
        try:
            GRPOConfig(
                output_dir="outputs/tmp", num_generations=num_generations,
                per_device_train_batch_size=per_device_train_batch_size,
                gradient_accumulation_steps=gradient_accumulation_steps, use_cpu=True, bf16=False,
                activation_checkpointing=False, report_to="none",
            )  # fmt: skip
        except ValueError:
            continue
        accepted.append(num_generations)
    return accepted


def check_group_sizes(group_sizes: Callable[[int, int], Sequence[int]]) -> ExerciseResult:
    """Notebook 03, exercise 7: ``group_sizes(per_device_train_batch_size, gradient_accumulation_steps)`` lists,
    in increasing order, every ``num_generations`` that ``GRPOConfig`` accepts; checked against TRL itself."""
    name = "Notebook 03, exercise 7 (group_sizes)"
    answers = {case: trl_group_sizes(*case) for case in GROUP_CASES}  # TRL asked once per case
    for (batch, accumulation), expected in answers.items():
        try:
            got = group_sizes(batch, accumulation)
        except Exception as error:
            return ExerciseResult(name, False, f"calling it raised {type(error).__name__}: {error}")
        if not isinstance(got, (list, tuple)) or not all(isinstance(g, int) for g in got):
            return ExerciseResult(name, False, f"expected a list of whole numbers; got {got!r}")
        got = list(got)
        case = f"per_device_train_batch_size={batch}, gradient_accumulation_steps={accumulation}"
        if got == expected:
            continue
        if 1 in got:
            hint = "a group of 1 has no one to be compared with: TRL asks for num_generations >= 2"
        elif accumulation > 1 and got == [g for g in expected if batch % g == 0]:
            hint = ("a generation batch is per_device_train_batch_size x steps_per_generation, and "
                    "steps_per_generation defaults to gradient_accumulation_steps: a group may span several "
                    "micro-batches")  # fmt: skip
        else:
            hint = "list every divisor of the generation batch from 2 up, in increasing order"
        return ExerciseResult(name, False, f"for {case} you gave {got}, TRL accepts {expected}: {hint}.")
    return ExerciseResult(name, True, f"matches TRL on {len(answers)} batches, e.g. 4 x 4 -> {answers[(4, 4)]}.")


# --------------------------------------------------------------------------------------------- notebook 04
def contains_answer(completions: list, answer: list[str], **kwargs: Any) -> list[float]:
    """A stand-in reward for the check: 2.0 for a completion that contains its answer, else 0.0."""
    return [2.0 if a in c[-1]["content"] else 0.0 for c, a in zip(completions, answer, strict=True)]


def check_scheduled_weight(scheduled_weight: Callable[..., Callable[..., list[float]]]) -> ExerciseResult:
    """Notebook 04, exercise 7: ``ScheduledWeight(reward_func, start, end, steps)`` scales a reward by a weight that
    falls linearly from ``start`` (first batch) to ``end`` (after ``steps`` batches) and then stays there, passes
    TRL's keyword arguments on, and keeps a ``__name__`` that names the reward it wraps (TRL logs by it)."""
    name = "Notebook 04, exercise 7 (ScheduledWeight)"
    start, end, steps = 1.0, 0.25, 3
    expected = [1.0, 0.75, 0.5, 0.25, 0.25]  # 1.0 - 0.75 * min(i, 3) / 3 for the batches i = 0, 1, 2, 3, 4
    try:
        wrapped = scheduled_weight(contains_answer, start=start, end=end, steps=steps)
    except Exception as error:
        return ExerciseResult(name, False, f"ScheduledWeight(reward, start=1.0, end=0.25, steps=3) raised "
                                           f"{type(error).__name__}: {error}")  # fmt: skip
    label = getattr(wrapped, "__name__", None)
    if not isinstance(label, str) or "contains_answer" not in label:
        hint = "name it after the wrapped reward, e.g. f'scheduled_{reward_func.__name__}' (TRL logs rewards by name)"
        return ExerciseResult(name, False, f"its __name__ is {label!r}: {hint}")
    completions, answer = [_chat("It is 4."), _chat("It is 5.")], ["4", "4"]  # raw rewards 2.0 and 0.0
    weights = []
    for _ in expected:
        scores, problem = _call(wrapped, completions, answer=answer)
        if scores is None:
            return ExerciseResult(name, False, f"{problem} (TRL passes the dataset's columns, e.g. answer=..., "
                                               "as keyword arguments: hand **kwargs on to the reward)")  # fmt: skip
        if scores[1] != 0.0:
            return ExerciseResult(name, False, f"a reward of 0 must stay 0 after scaling; got {scores}")
        weights.append(scores[0] / 2.0)
    if all(math.isclose(w, e) for w, e in zip(weights, expected, strict=True)):
        return ExerciseResult(name, True, f"weights by batch {expected}, and it is logged as {label!r}.")
    if all(math.isclose(w, e) for w, e in zip(weights, expected[1:] + [end], strict=True)):
        hint = "the first batch must use the start weight: step the schedule after scoring, as AdaptiveWeight does"
    elif weights[-1] < end - 1e-9:
        hint = "after `steps` batches the weight stays at `end`: clamp it"
    elif len({round(w, 9) for w in weights}) == 1:
        hint = "the weight must fall from batch to batch: count the calls"
    else:
        hint = "weight for batch i (from 0) = start + (end - start) * min(i, steps) / steps"
    got = [round(w, 4) for w in weights]
    return ExerciseResult(name, False, f"weights by batch {got}, expected {expected}: {hint}.")


# --------------------------------------------------------------------------------------------- notebook 05
LORA_CASES = [(4, ["q_proj", "v_proj"]), (8, ["gate_proj", "down_proj"]), (2, "all-linear")]  # (r, target_modules)


def _tiny_llama() -> torch.nn.Module:
    """A randomly initialised two-layer Llama whose layers' in and out sizes all differ from one another."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)  # fmt: skip
    return LlamaForCausalLM(config)


def peft_lora_parameters(r: int, target_modules: str | list[str]) -> int:
    """How many parameters PEFT trains on the check's tiny Llama for a ``LoraConfig(r=r, target_modules=...)``."""
    from peft import LoraConfig, get_peft_model

    with warnings.catch_warnings():  # PEFT calls a transformers method that warns of its own renaming
        warnings.simplefilter("ignore", FutureWarning)
        model = get_peft_model(_tiny_llama(), LoraConfig(r=r, lora_alpha=2 * r, target_modules=target_modules))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def check_lora_parameters(lora_parameter_count: Callable[..., int]) -> ExerciseResult:
    """Notebook 05, exercise 6: ``lora_parameter_count(model, r, target_modules)`` is the number of parameters
    LoRA trains, from the model's layer shapes; checked against PEFT itself on a tiny Llama."""
    name = "Notebook 05, exercise 6 (lora_parameter_count)"
    for r, targets in LORA_CASES:
        expected = peft_lora_parameters(r, targets)
        model = _tiny_llama()  # a fresh one per case: an answer that wraps the model in PEFT changes it
        linears = {n: m for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
        try:
            got = lora_parameter_count(model, r, targets)
        except Exception as error:
            return ExerciseResult(name, False, f"calling it with r={r}, target_modules={targets!r} raised "
                                               f"{type(error).__name__}: {error}")  # fmt: skip
        if got == expected:
            continue
        chosen = {n: m for n, m in linears.items()
                  if (n != "lm_head" if targets == "all-linear" else n.split(".")[-1] in targets)}  # fmt: skip
        head = linears["lm_head"]
        if got in (sum(r * m.in_features for m in chosen.values()), sum(r * m.out_features for m in chosen.values())):
            hint = "each adapted layer trains two matrices, A (r x in_features) and B (out_features x r)"
        elif targets == "all-linear" and got == expected + r * (head.in_features + head.out_features):
            hint = "PEFT's 'all-linear' adapts every Linear layer except the output layer, lm_head"
        elif got == sum(m.weight.numel() for m in chosen.values()):
            hint = "LoRA does not train the layer's own weight (in x out), only r x (in + out) beside it"
        else:
            hint = ("add r * (in_features + out_features) for every nn.Linear whose name ends with one of "
                    "target_modules (\"all-linear\": every one but lm_head)")  # fmt: skip
        return ExerciseResult(name, False, f"r={r}, target_modules={targets!r}: you counted {got}, PEFT trains "
                                           f"{expected}; {hint}.")  # fmt: skip
    return ExerciseResult(name, True, f"matches PEFT on {len(LORA_CASES)} configurations of a tiny Llama.")


# --------------------------------------------------------------------------------------------- notebook 06
def check_entropy(entropy_from_logits: Callable[[torch.Tensor], torch.Tensor]) -> ExerciseResult:
    """Notebook 06, exercise 4: ``entropy_from_logits(logits)`` returns the entropy (in nats) of the softmax
    over the last dimension, one value per position."""
    name = "Notebook 06, exercise 4 (entropy_from_logits)"
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(2, 5, 11, generator=generator, dtype=torch.float64) * 3
    logits[0, 0] = torch.tensor([50.0] + [0.0] * 10)  # almost certain: entropy near 0
    logits[0, 1] = 0.0  # uniform over 11 tokens: entropy log(11)
    expected = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1)
    try:
        got = entropy_from_logits(logits.clone())
    except Exception as error:
        return ExerciseResult(name, False, f"calling it raised {type(error).__name__}: {error}")
    if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(expected.shape):
        shape = tuple(got.shape) if isinstance(got, torch.Tensor) else type(got).__name__
        return ExerciseResult(
            name, False, f"expected a tensor of shape {tuple(expected.shape)} (batch, positions), got {shape}: "
            "sum over the vocabulary dimension only (dim=-1)."
        )  # fmt: skip
    got = got.to(torch.float64)
    if torch.allclose(got, -expected, atol=1e-4):
        return ExerciseResult(name, False, "the wrong sign: entropy is -sum(p * log p), never negative.")
    if torch.allclose(got, expected / math.log(2), atol=1e-4):
        return ExerciseResult(name, False, "these are bits (log base 2); TRL logs nats: use the natural log.")
    if not torch.allclose(got, expected, atol=1e-4):
        worst = (got - expected).abs().max().item()
        return ExerciseResult(
            name, False, f"off by up to {worst:.3g}. Use p = logits.softmax(-1) and logp = logits.log_softmax(-1) "
            "(log of a softmax underflows for confident tokens)."
        )  # fmt: skip
    return ExerciseResult(
        name, True, f"uniform over 11 tokens gives {got[0, 1].item():.4f} = log(11); a near-certain token "
        f"{got[0, 0].item():.1e}."
    )  # fmt: skip


# --------------------------------------------------------------------------------------------- notebook 07
def check_hack_is_caught(
    gameable: Callable[..., list[float]],
    fixed: Callable[..., list[float]],
    hack: str,
    honest: str,
    **columns: Sequence[Any],
) -> ExerciseResult:
    """Notebook 07, exercise 3: ``hack`` scores at least as well as ``honest`` under ``gameable``, and less
    under ``fixed``. ``columns`` are the keyword arguments TRL would pass (one-element lists)."""
    name = "Notebook 07, exercise 3 (a hack of the fix)"
    if hack.strip() == honest.strip():
        return ExerciseResult(name, False, "the hack and the honest answer are the same text.")
    results = {}
    for label, fn in (("gameable", gameable), ("fixed", fixed)):
        scores, problem = _call(fn, [_chat(hack), _chat(honest)], **{k: list(v) * 2 for k, v in columns.items()})
        if scores is None:
            return ExerciseResult(name, False, f"the {label} reward: {problem}")
        results[label] = scores
    (gh, go), (fh, fo) = results["gameable"], results["fixed"]
    if gh < go:
        return ExerciseResult(
            name, False, f"the hack scores {gh} and the honest answer {go} under {getattr(gameable, '__name__', 'it')}"
            ": that is not a hack yet. Find a lazy text that the reward pays at least as well."
        )  # fmt: skip
    if not fh < fo:
        return ExerciseResult(
            name, False, f"your fixed reward gives the hack {fh} and the honest answer {fo}: it must pay the honest "
            "answer more."
        )  # fmt: skip
    return ExerciseResult(name, True, f"gameable: hack {gh} >= honest {go}; fixed: hack {fh} < honest {fo}.")


def check_duplicate_penalty(duplicate_penalty: Callable[..., list[float]]) -> ExerciseResult:
    """Notebook 07, exercise 5: ``duplicate_penalty(completions, **kwargs)`` gives completions that repeat
    another completion of the batch less than unique ones, and treats an all-distinct batch alike."""
    name = "Notebook 07, exercise 5 (duplicate_penalty)"
    generic = "I am ready with a short answer in one sentence."
    batch = [_chat(generic), _chat("Bees make honey."), _chat(generic), _chat("Tea is a drink made from leaves.")]
    scores, problem = _call(duplicate_penalty, batch, prompts=[[]] * 4, completion_ids=[[0]] * 4)
    if scores is None:
        return ExerciseResult(name, False, problem)
    if not (scores[0] < scores[1] and scores[2] < scores[1] and scores[0] < scores[3] and scores[2] < scores[3]):
        return ExerciseResult(
            name, False, f"in a batch where two answers are identical the scores were {scores}: both copies must "
            "score less than each unique answer. Count each text in the batch (collections.Counter)."
        )  # fmt: skip
    distinct, problem = _call(duplicate_penalty, [batch[1], batch[3], _chat("Owls hunt at night.")])
    if distinct is None:
        return ExerciseResult(name, False, problem)
    if len(set(distinct)) != 1:
        return ExerciseResult(
            name, False, f"three distinct answers scored {distinct}: without duplicates the penalty must treat "
            "every answer alike (else it becomes a second, hidden reward)."
        )  # fmt: skip
    return ExerciseResult(name, True, f"duplicates score {scores[0]}, unique answers {scores[1]}.")


# --------------------------------------------------------------------------------------------- notebook 08
def check_soft_label_reward(soft_label_reward: Callable[..., list[float]]) -> ExerciseResult:
    """Notebook 08, exercise 4: 1.0 for exactly the label, 0.5 when the right label appears in a longer
    answer, 0.0 for a wrong label and for an answer that names both labels (a hedge, not an answer)."""
    name = "Notebook 08, exercise 4 (soft_label_reward)"
    cases = [
        ("Positive.", "positive", 1.0),
        ("negative", "negative", 1.0),
        ("This review is positive.", "positive", 0.5),
        ("I think it is negative overall", "negative", 0.5),
        ("negative", "positive", 0.0),
        ("The review sounds negative to me.", "positive", 0.0),
        ("positive or negative", "positive", 0.0),
    ]
    scores, problem = _call(soft_label_reward, [_chat(t) for t, _, _ in cases], label=[lab for _, lab, _ in cases])
    if scores is None:
        return ExerciseResult(name, False, problem)
    for (text, label, want), got in zip(cases, scores, strict=True):
        if abs(got - want) > 1e-9:
            hint = (
                " An answer that names both labels is a hedge, and paying it invites the model to list every label."
                if "or" in text.split()
                else ""
            )
            return ExerciseResult(name, False, f"{text!r} with label {label!r} scored {got}, expected {want}.{hint}")
    return ExerciseResult(name, True, f"all {len(cases)} cases score as expected (exact 1.0, inside a sentence 0.5).")


# --------------------------------------------------------------------------------------------- notebook 09
DECODE_CASES = [  # (parameters, bytes per parameter, bandwidth in GB/s, batch) -> tokens per second, at most
    ((135e6, 4, 100, 1), 100e9 / (135e6 * 4)),  # SmolLM2-135M in float32, 100 GB/s, one sequence: 185.2
    ((135e6, 2, 3350, 64), 64 * 3350e9 / (135e6 * 2)),  # bfloat16 on an H100's 3350 GB/s, 64 sequences: 794,074
    ((7e9, 2, 3350, 1), 3350e9 / (7e9 * 2)),  # a 7B model, one sequence: 239.3
]


def check_decode_bound(decode_bound: Callable[..., float]) -> ExerciseResult:
    """Notebook 09, exercise 5: ``decode_bound(parameters, bytes_per_parameter, bandwidth_gb_per_s, batch_size)``
    is the most tokens per second that decoding can produce when every step reads all the weights once from
    memory: batch_size x bandwidth / weight bytes (GB = 1e9 bytes; the KV cache and activations ignored)."""
    name = "Notebook 09, exercise 5 (decode_bound)"
    for (parameters, nbytes, bandwidth, batch), expected in DECODE_CASES:
        try:
            got = float(decode_bound(parameters, nbytes, bandwidth, batch))
        except Exception as error:
            return ExerciseResult(name, False, f"calling it raised {type(error).__name__}: {error}")
        if math.isclose(got, expected, rel_tol=1e-6):
            continue
        case = f"decode_bound({parameters:g}, {nbytes}, {bandwidth}, {batch})"
        if math.isclose(got * batch, expected, rel_tol=1e-6) and batch > 1:
            hint = "one read of the weights serves every sequence in the batch: multiply by batch_size"
        elif any(math.isclose(got, expected * f, rel_tol=1e-6) for f in (1024**3 / 1e9, 1e9 / 1024**3)):
            hint = "GB/s here means 1e9 bytes per second, not 1024**3"
        elif any(math.isclose(got, expected * f, rel_tol=1e-6) for f in (8, 1 / 8)):
            hint = "bytes_per_parameter already counts bytes: no factor of 8"
        else:
            hint = "tokens per second = batch_size x bandwidth (bytes/s) / (parameters x bytes_per_parameter)"
        return ExerciseResult(name, False, f"{case} gave {got:,.1f}, expected {expected:,.1f}: {hint}.")
    return ExerciseResult(name, True, f"a 135M float32 model at 100 GB/s: at most {DECODE_CASES[0][1]:.0f} tokens/s "
                                      f"for one sequence, {64 * DECODE_CASES[0][1]:,.0f} for 64.")  # fmt: skip


# --------------------------------------------------------------------------------------------- notebook 11
def check_sequence_ratio(sequence_ratio: Callable[..., torch.Tensor]) -> ExerciseResult:
    """Notebook 11, exercise 4: ``sequence_ratio(logps, old_logps, mask)`` is GSPO's ratio, one per completion:
    ``exp(mean over the completion's own tokens of (logps - old_logps))``, shape (completions, 1)."""
    from course_utils.objectives import importance_ratio

    name = "Notebook 11, exercise 4 (sequence_ratio)"
    old = torch.log(torch.tensor([[0.5, 0.2, 0.4, 0.1], [0.3, 0.6, 0.9, 0.9]], dtype=torch.float64))
    # completion 0: log-ratios 0.4, 0.2, padding (masked, wildly moved); completion 1: four tokens, log-ratio 0.1 each
    logps = old + torch.tensor([[0.4, 0.2, 5.0, 5.0], [0.1, 0.1, 0.1, 0.1]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    expected = importance_ratio(logps, old, mask, "sequence")  # exp(0.3) and exp(0.1)
    try:
        got = sequence_ratio(logps.clone(), old.clone(), mask.clone())
    except Exception as error:
        return ExerciseResult(name, False, f"calling it raised {type(error).__name__}: {error}")
    if not isinstance(got, torch.Tensor) or got.numel() != 2:
        return ExerciseResult(name, False, f"expected one ratio per completion, a tensor of shape (2, 1); got {got!r}")
    got = got.to(torch.float64).reshape(2, 1)
    mistakes = {  # what a wrong answer computes, and the hint for it
        "the sum of the log-ratios (the whole completion's likelihood ratio)": (
            torch.exp(torch.tensor([[0.6], [0.4]], dtype=torch.float64)),
            "divide the masked sum by the completion's number of tokens: GSPO's 1/|o_i| exponent",
        ),
        "a mean over every position, padding included": (
            torch.exp(torch.tensor([[10.6 / 4], [0.1]], dtype=torch.float64)),
            "multiply by the mask before summing, and divide by mask.sum(-1), not by the width",
        ),
        "the arithmetic mean of the token ratios": (
            torch.tensor([[(math.exp(0.4) + math.exp(0.2)) / 2], [math.exp(0.1)]], dtype=torch.float64),
            "average the log-ratios, then exponentiate: a geometric mean",
        ),
    }
    for what, (value, hint) in mistakes.items():
        if torch.allclose(got, value, atol=1e-6):
            return ExerciseResult(name, False, f"this is {what}: {hint}.")
    if not torch.allclose(got, expected, atol=1e-6):
        return ExerciseResult(
            name, False, f"got {got.flatten().tolist()}, expected {expected.flatten().tolist()} "
            "(exp of 0.3 and of 0.1: each completion's mean log-ratio over its own tokens)."
        )  # fmt: skip
    return ExerciseResult(name, True, f"ratios {[round(v, 4) for v in got.flatten().tolist()]} = exp(0.3), exp(0.1).")


def check_pessimistic(pessimistic: Callable[..., Sequence[float]]) -> ExerciseResult:
    """Notebook 12, exercise 4: ``pessimistic(member_scores, k)`` is, per completion, the members' mean minus ``k``
    times their spread (population standard deviation), as ``course_utils.reward_models.combine_scores`` does."""
    from course_utils.reward_models import combine_scores

    name = "Notebook 12, exercise 4 (pessimistic)"
    members = [[1.0, 2.0, 0.0], [3.0, 2.0, 4.0], [2.0, 2.0, 2.0]]  # 3 reward models x 3 completions
    # completion 0: scores 1, 3, 2 -> mean 2, spread sqrt(2/3); completion 1: all 2 -> spread 0;
    # completion 2: 0, 4, 2 -> mean 2, spread sqrt(8/3)
    k = 0.5
    expected = combine_scores(members, "mean_minus_std", k)
    try:
        got = [float(v) for v in pessimistic([list(m) for m in members], k)]
    except Exception as error:
        return ExerciseResult(name, False, f"calling it raised {type(error).__name__}: {error}")
    if len(got) != 3:
        return ExerciseResult(name, False, f"expected one score per completion (3), got {len(got)}: {got}")
    per_completion = list(zip(*members, strict=True))

    def same(values: Sequence[float]) -> bool:
        return all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(got, values, strict=True))

    mistakes = {  # what a wrong answer computes, and the hint for it
        "the plain mean": ([statistics.fmean(c) for c in per_completion], "subtract k times the members' spread"),
        "the mean minus the sample standard deviation (n - 1)": (
            [statistics.fmean(c) - k * statistics.stdev(c) for c in per_completion],
            "use the population spread (divide by the number of members, statistics.pstdev)",
        ),
        "the mean minus the full spread, ignoring k": (
            combine_scores(members, "mean_minus_std", 1.0),
            "multiply the spread by k",
        ),
        "a spread across completions instead of across members": (
            [statistics.fmean(c) - k * statistics.pstdev(m) for c, m in zip(per_completion, members, strict=True)],
            "the spread is over the members' scores for the same completion: member_scores[m][j] for every m",
        ),
    }
    for what, (value, hint) in mistakes.items():
        if same(value):
            return ExerciseResult(name, False, f"this is {what}: {hint}.")
    if not same(expected):
        return ExerciseResult(
            name,
            False,
            f"got {got}, expected {[round(v, 4) for v in expected]} (means 2, 2, 2 "
            "minus 0.5 times spreads sqrt(2/3), 0, sqrt(8/3)).",
        )
    return ExerciseResult(name, True, f"scores {[round(v, 4) for v in got]}: mean minus {k} x spread, per completion.")


# --------------------------------------------------------------------------------------------- notebook 10
def check_average_tool(average: Callable[..., Any]) -> ExerciseResult:
    """Notebook 10, exercise 1: ``average(numbers: list[float]) -> str``, a tool TRL can show the model and run.

    A tool needs type hints and a docstring whose ``Args:`` section describes every argument (TRL builds the
    schema the model reads from them), returns text, and raises a clear error on bad input, which TRL hands
    the model as ``{"error": ...}``.
    """
    from transformers.utils import get_json_schema

    from course_utils.rewards import parse_number
    from course_utils.tools import tool_reply

    name = "Notebook 10, exercise 1 (average tool)"
    try:
        schema = get_json_schema(average)["function"]
    except Exception as error:  # the learner's function: say what the schema builder needs
        return ExerciseResult(
            name, False, f"TRL cannot build its schema: {error}. Add type hints and an Args: section."
        )
    parameter = schema["parameters"]["properties"].get("numbers")
    if parameter is None or parameter.get("type") != "array":
        return ExerciseResult(
            name, False, f"the schema should have an array argument 'numbers'; it has {schema['parameters']}"
        )
    cases = [([2, 4, 9], 5.0), ([1.5, 2], 1.75), ([7], 7.0)]  # (2 + 4 + 9) / 3 = 5; (1.5 + 2) / 2 = 1.75
    for numbers, expected in cases:
        result = tool_reply({"name": schema["name"], "arguments": {"numbers": numbers}}, [average])["content"]
        value = parse_number(result)
        if value is None or not math.isclose(value, expected):
            return ExerciseResult(
                name, False, f"average({numbers}) gave {result!r}, expected the text of {expected:g}."
            )
    empty = tool_reply({"name": schema["name"], "arguments": {"numbers": []}}, [average])
    if not empty["content"].startswith("{'error'") or "empty" not in empty["content"].lower():
        return ExerciseResult(
            name,
            False,
            f"average([]) gave {empty['content']!r}: raise ValueError with a message that says the list is empty.",
        )
    return ExerciseResult(
        name, True, f"schema {schema['name']}(numbers: array); average([]) tells the model {empty['content']}."
    )
