"""Measure a model on held-out prompts: batched generation and the course's metrics.

Every notebook measures *before* and *after* training with the same function, the same prompts
and the same decoding settings, so the difference is what training changed.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, NamedTuple

import pandas as pd
import torch
from datasets import Dataset
from tqdm.auto import tqdm
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from course_utils.rewards import completion_text, correctness_reward, parse_number, strict_format_reward

Prompt = str | list[dict[str, str]]
_ANY_NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?")


class Generations(NamedTuple):
    """What :func:`generate` returns: unpack it as ``completions, finished = generate(...)``."""

    completions: list[str]  #: the generated text, one per prompt, special tokens removed
    finished: list[bool]  #: per completion, whether it ended on its own (an end-of-sequence token) within budget


@torch.no_grad()
def generate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Prompt],
    *,
    max_new_tokens: int,
    batch_size: int = 32,
    do_sample: bool = False,
    temperature: float = 1.0,
    seed: int = 0,
    progress: bool = True,
) -> Generations:
    """Complete each prompt (a string, or chat messages rendered with the chat template).

    Greedy by default (``do_sample=False``): deterministic, the usual way to report a metric.
    Sampling (``do_sample=True``) shows what GRPO sees during training, reproducibly for a given ``seed``.
    Returns the completions and, per completion, whether it ended on its own rather than being cut off at
    ``max_new_tokens`` (``.completions`` alone when that is all you need). The random states of the CPU and
    of the devices the model is on come back as they were, so evaluating inside training leaves it undisturbed.
    The model runs in its weights' precision, also after a bf16 or fp16 training run (:func:`weights_precision`).
    The tokens every prompt starts with (a system prompt) run through the model once (:func:`generate_sharing_prefix`).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}.")
    texts = [
        p if isinstance(p, str) else tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True)
        for p in prompts
    ]
    was_training = model.training
    model.eval()
    padding_side = tokenizer.padding_side
    tokenizer.padding_side = "left"  # decoder-only models continue from the right edge
    completions: list[str] = []
    finished: list[bool] = []
    stop_ids = _stop_token_ids(model, tokenizer)
    if do_sample:
        sampling = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
    else:  # None clears any sampling defaults the model's generation_config carries
        sampling = {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    try:
        with _seeded(seed, model), weights_precision(model):
            batches = range(0, len(texts), batch_size)
            for start in tqdm(batches, desc="generating", disable=not progress, leave=False):
                batch = tokenizer(
                    texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False
                ).to(model.device)
                out = generate_sharing_prefix(  # a system prompt every row starts with runs once
                    model, **batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, **sampling
                )
                new_tokens = out[:, batch["input_ids"].shape[1] :]
                completions += tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
                finished += torch.isin(new_tokens, stop_ids).any(dim=1).tolist()
    finally:
        tokenizer.padding_side = padding_side
        model.train(was_training)
    return Generations(completions, finished)


@torch.no_grad()
def generate_sharing_prefix(
    model: PreTrainedModel, input_ids: torch.Tensor, attention_mask: torch.Tensor, **generate_kwargs: Any
) -> torch.Tensor:
    """``model.generate`` on a left-padded batch, with the tokens that start every row run through the model once.

    Prompts rendered with one system prompt share their first tokens: notebook 10's 40 held-out questions share 137
    of their about 150, the tool description. ``generate`` runs each row's copy of them through the model; here they
    run once, their keys and values are copied to every row, and ``generate`` continues from there. Each row keeps
    its own positions (the gap between the shared part and the rest is padding, which attention skips), so the
    tokens are those of ``model.generate`` up to float rounding: in float32, every number notebooks 02, 04, 10, 11
    and 12 printed in CI mode was the same as with ``generate`` (docs/PROOF.md). Under autocast it runs ``generate``
    as is: in bf16 the shared part's rounding depends on the batch's shape, and 13 of notebook 10's 40 rambling
    base-model turns came out different, so the records proved under bf16 would no longer be reproduced. Returns
    what ``generate`` returns, the input as given followed by the new tokens, so callers slice it as before.
    """
    rows = [ids[mask.bool()] for ids, mask in zip(input_ids, attention_mask, strict=True)]
    shortest = min(len(row) for row in rows)
    stacked = torch.stack([row[:shortest] for row in rows])
    differs = (stacked != stacked[0]).any(dim=0).nonzero()
    shared = min(int(differs[0]) if len(differs) else shortest, shortest - 1)  # every row keeps one token to run
    if len(rows) < 2 or shared < 1 or torch.is_autocast_enabled(input_ids.device.type):
        return model.generate(input_ids=input_ids, attention_mask=attention_mask, **generate_kwargs)
    cache = model(input_ids=rows[0][None, :shared], use_cache=True).past_key_values
    cache.batch_repeat_interleave(len(rows))
    width = max(len(row) for row in rows) - shared  # the most tokens of its own a row has
    ids = torch.full((len(rows), shared + width), generate_kwargs.get("pad_token_id") or 0)  # pads: masked out
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):  # the shared part, padding, then the row's own tokens
        own = len(row) - shared
        ids[i, :shared], ids[i, shared + width - own :] = row[:shared], row[shared:]
        mask[i, :shared], mask[i, shared + width - own :] = 1, 1
    out = model.generate(input_ids=ids.to(input_ids.device), attention_mask=mask.to(input_ids.device),
                         past_key_values=cache, **generate_kwargs)  # fmt: skip
    return torch.cat([input_ids, out[:, shared + width :]], dim=1)


@contextmanager
def weights_precision(model: PreTrainedModel) -> Iterator[None]:
    """For the call, undo the autocast that a mixed-precision trainer left on ``model.forward``.

    With ``bf16=True`` or ``fp16=True``, accelerate (under TRL's and transformers' trainers) replaces the model's
    ``forward`` by one under autocast and keeps the original as ``model._original_forward``; the replacement stays
    after training. A trained policy would then be measured in bf16 while the base model it is compared with was
    measured in float32, and the "gain" would hold the precision's effect too: notebook 11 under bf16 at
    learning rate 0, where nothing is learned, measured its held-out error 10.8 characters off the base model's
    (2026-12-02). Restored afterwards, so training goes on as it was.
    """
    original = model.__dict__.get("_original_forward")
    if original is None:
        yield
        return
    wrapped = model.__dict__["forward"]
    model.forward = original
    try:
        yield
    finally:
        model.forward = wrapped


@contextmanager
def _seeded(seed: int, model: PreTrainedModel) -> Iterator[None]:
    """Seed the CPU's and the model's accelerators' random generators; restore their states afterwards.

    ``torch.random.fork_rng`` restores them, so sampling here leaves a training run's random streams where
    they were. (``torch.manual_seed`` would reseed every accelerator, and restoring only the CPU's state
    left a GPU run's stream reset after each evaluation inside a training callback.)
    """
    devices = sorted({p.device for p in model.parameters() if p.device.type not in ("cpu", "meta")}, key=str)
    with torch.random.fork_rng(devices=devices, device_type=devices[0].type if devices else None):
        torch.random.default_generator.manual_seed(seed)
        for device in devices:
            with torch.accelerator.device_index(device.index):
                torch.get_device_module(device.type).manual_seed(seed)
        yield


def _stop_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> torch.Tensor:
    eos = model.generation_config.eos_token_id
    ids = set(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return torch.tensor(sorted(ids), device=model.device)


@dataclass(frozen=True)
class Estimate:
    """A mean with a 95% confidence interval; ``low <= mean <= high`` always holds.

    A bound computed in floating point can land a rounding error beyond the mean (Wilson's upper bound at
    100% comes out as 0.9999999999999999); such a bound is moved onto the mean, so the error bars
    ``mean - low`` and ``high - mean`` are never negative. A bound further off than rounding is a mistake
    and raises. ``low`` and ``high`` are NaN when there is no interval (the mean of a single value);
    matplotlib leaves such an error bar out.
    """

    mean: float
    low: float
    high: float
    n: int

    def __post_init__(self) -> None:
        mean, low, high = float(self.mean), float(self.low), float(self.high)
        slack = 1e-9 * max(1.0, abs(mean))  # far above rounding error, far below any real interval
        if low > mean + slack or high < mean - slack:  # comparisons with NaN are False: NaN passes
            raise ValueError(
                f"Estimate needs low <= mean <= high, got low={low}, mean={mean}, high={high}; "
                "pass them in the order Estimate(mean, low, high, n)."
            )
        object.__setattr__(self, "low", mean if low > mean else low)
        object.__setattr__(self, "high", mean if high < mean else high)

    def __str__(self) -> str:
        if math.isnan(self.low) or math.isnan(self.high):
            return f"{self.mean:.1f} (no interval, n={self.n})"
        return f"{self.mean:.1f} (95% CI {self.low:.1f}-{self.high:.1f}, n={self.n})"

    def percent(self) -> str:
        """For proportions: ``"50% (95% CI 30%-70%, n=20)"``."""
        if math.isnan(self.low) or math.isnan(self.high):
            return f"{self.mean:.0%} (no interval, n={self.n})"
        return f"{self.mean:.0%} (95% CI {self.low:.0%}-{self.high:.0%}, n={self.n})"


def mean_with_ci(values: Sequence[float]) -> Estimate:
    """The mean of ``values`` with a 95% normal-approximation interval (1.96 standard errors each side).

    One value has no spread to measure, so its interval is unknown: ``low`` and ``high`` are NaN.
    """
    values = [float(v) for v in values]
    if not values:
        raise ValueError("Cannot estimate a mean from no values.")
    mean = statistics.fmean(values)
    half = 1.96 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return Estimate(mean, mean - half, mean + half, len(values))


def length_report(
    completions: Sequence[str],
    target_chars: int,
    finished: Sequence[bool] | None = None,
    topics: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Character lengths of completions, their distance from ``target_chars``, and two honesty checks.

    ``finished_share`` (when ``finished`` is given) is the share of completions that ended on their own
    rather than at the token budget; ``distinct_share`` is the share of answers that are not a copy of
    another. A model that games a length reward by filling the budget, or by giving every prompt the same
    reply, shows up here. With ``topics`` (one per completion), only a copy given to a *different* topic
    counts: the same short answer to "Tell me about bees." and "Share a fact about bees." is a concise
    model, not a collapsed one. Without them every prompt is its own topic, and ``distinct_share`` is the
    share of different texts.

    >>> length_report(["Bees pollinate.", "Bees pollinate.", "Nice!", "Nice!"], 15,
    ...               topics=["bees", "bees", "rain", "tea"])["distinct_share"]  # "Nice!" twice, for two topics: 1 copy
    0.75
    """
    lengths = [len(c) for c in completions]
    errors = [abs(n - target_chars) for n in lengths]
    report = {
        "lengths": lengths,
        "errors": errors,
        "mean_length": statistics.fmean(lengths),
        "length_error": mean_with_ci(errors),
        "within_20pct": sum(e <= 0.2 * target_chars for e in errors) / len(errors),
        "distinct_share": (len(completions) - _copies_across_topics(completions, topics)) / len(completions),
    }
    if finished is not None:
        if len(finished) != len(completions):
            raise ValueError(f"finished has {len(finished)} entries for {len(completions)} completions.")
        report["finished_share"] = sum(map(bool, finished)) / len(finished)
    return report


def _copies_across_topics(completions: Sequence[str], topics: Sequence[str] | None) -> int:
    """How many answers repeat a text that another topic also got: each text keeps its most frequent topic."""
    if topics is None:
        topics = range(len(completions))  # every prompt its own topic: copies = answers - different texts
    elif len(topics) != len(completions):
        raise ValueError(f"topics has {len(topics)} entries for {len(completions)} completions.")
    per_text: dict[str, Counter] = {}
    for text, topic in zip(completions, topics, strict=True):
        per_text.setdefault(text, Counter())[topic] += 1
    return sum(c.total() - max(c.values()) for c in per_text.values())


def proportion_ci(successes: int, n: int, z: float = 1.96) -> Estimate:
    """A success rate with its 95% Wilson interval (sensible at 0% and 100%, unlike the normal one)."""
    if n <= 0:
        raise ValueError("Cannot estimate a proportion from no trials.")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be between 0 and n={n}, got {successes}.")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Estimate(p, max(0.0, centre - half), min(1.0, centre + half), n)


def says_something_about(text: str, topic: str) -> bool:
    """Whether ``text`` uses a word about ``topic`` from :data:`course_utils.data.TOPIC_WORDS`.

    The list never holds the topic's own name, so an answer that only repeats the topic does not count: a
    measure of "answered the question" that a reward checking for the topic's name cannot game.

    >>> says_something_about("They make honey in a hive.", "bees"), says_something_about("Bees are bees.", "bees")
    (True, False)
    """
    from course_utils.data import TOPIC_WORDS

    if topic not in TOPIC_WORDS:
        raise KeyError(f"no word list for topic {topic!r}: add one to course_utils.data.TOPIC_WORDS")
    tokens = re.findall(r"[a-z]+", text.lower())
    return any(t.startswith(stem) if len(stem) > 3 else t in (stem, stem + "s")
               for stem in TOPIC_WORDS[topic] for t in tokens)


def last_number(text: str) -> float | None:
    """The last number anywhere in ``text`` (``"4 + 7 = 11."`` gives 11.0), or None: the lenient reading."""
    found = _ANY_NUMBER.findall(text.replace(",", ""))
    return float(found[-1]) if found else None


def answer_scores(completions: Sequence[Any], answers: Sequence[Any]) -> dict[str, list[float]]:
    """Per-completion scores (1.0 or 0.0) for the three answer metrics; :func:`answer_report` averages them.

    * ``format``: :func:`course_utils.rewards.strict_format_reward` (the tags, in order, one number);
    * ``accuracy``: :func:`course_utils.rewards.correctness_reward` (the number inside the tags is right);
    * ``lenient_accuracy``: the last number anywhere in the reply is right, tags or not, so a model that
      writes "4 + 7 = 11" counts as correct. Format and correctness are then read apart: strict accuracy
      needs both, lenient accuracy only the arithmetic.
    """
    if len(completions) != len(answers):
        raise ValueError(f"{len(completions)} completions but {len(answers)} answers.")
    lenient = []
    for completion, answer in zip(completions, answers, strict=True):
        value, expected = last_number(completion_text(completion)), parse_number(str(answer))
        lenient.append(float(value is not None and expected is not None and abs(value - expected) < 1e-9))
    return {
        "format": [float(r) for r in strict_format_reward(completions)],
        "accuracy": [float(r) for r in correctness_reward(completions, answer=answers)],
        "lenient_accuracy": lenient,
    }


def answer_report(completions: Sequence[str], answers: Sequence[Any]) -> dict[str, Estimate]:
    """Strict format, exact accuracy and lenient accuracy of reasoning/answer completions, with 95% intervals.

    The definitions are :func:`answer_scores`'s.
    """
    scores = answer_scores(completions, answers)
    n = len(completions)
    return {metric: proportion_ci(int(sum(values)), n) for metric, values in scores.items()}


def evaluate_answers(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    *,
    max_new_tokens: int,
    batch_size: int = 64,
    do_sample: bool = False,
    temperature: float = 1.0,
    seed: int = 0,
    progress: bool = True,
) -> tuple[dict[str, Estimate], list[str]]:
    """Generate for every row of ``dataset`` (``prompt`` and ``answer`` columns) and score the answers.

    Returns :func:`answer_report`'s ``{"format": ..., "accuracy": ...}`` and the completions, so a notebook
    can print both the numbers and what the model wrote.
    """
    missing = {"prompt", "answer"} - set(dataset.column_names)
    if missing:
        raise ValueError(f"evaluate_answers needs columns {sorted(missing)}; the dataset has {dataset.column_names}.")
    completions = generate(
        model, tokenizer, dataset["prompt"], max_new_tokens=max_new_tokens, batch_size=batch_size,
        do_sample=do_sample, temperature=temperature, seed=seed, progress=progress,
    ).completions  # fmt: skip
    return answer_report(completions, dataset["answer"]), completions


def sampled_answer_scores(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: Dataset,
    *,
    samples_per_prompt: int,
    temperature: float,
    max_new_tokens: int,
    batch_size: int = 64,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Per row of ``dataset``, the mean of :func:`answer_scores` over ``samples_per_prompt`` sampled answers.

    This reads the policy GRPO trains (sampling at its temperature) rather than its greedy answer, which can
    stop moving once the most likely reply is right. With the same ``seed`` two models draw with the same
    random numbers, so identical models score identically and a paired comparison is not blurred by the draw.

    >>> scores = sampled_answer_scores(model, tokenizer, test, samples_per_prompt=8, temperature=0.7,
    ...                                max_new_tokens=48)  # doctest: +SKIP
    >>> scores["format"][0]  # the share of row 0's eight answers in the strict format  # doctest: +SKIP
    """
    if samples_per_prompt < 1:
        raise ValueError(f"samples_per_prompt must be >= 1, got {samples_per_prompt}.")
    k = samples_per_prompt
    prompts = [p for p in dataset["prompt"] for _ in range(k)]
    completions = generate(model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
                           do_sample=True, temperature=temperature, seed=seed, progress=False).completions
    scores = answer_scores(completions, [a for a in dataset["answer"] for _ in range(k)])
    return {metric: [statistics.fmean(v[i : i + k]) for i in range(0, len(v), k)] for metric, v in scores.items()}


def comparison_table(measurements: dict[str, dict[str, Estimate]]) -> pd.DataFrame:
    """A small table (a pandas DataFrame), one row per model or stage, each cell "mean% (95% CI)".

    ``measurements`` maps a row label (e.g. ``"base"``, ``"after GRPO"``) to a report such as
    :func:`answer_report` returns. Every report must have the same metrics.
    """
    metrics = [list(report) for report in measurements.values()]
    if any(m != metrics[0] for m in metrics):
        raise ValueError(f"Every row needs the same metrics; got {metrics}.")
    rows = {label: {k: v.percent() for k, v in report.items()} for label, report in measurements.items()}
    return pd.DataFrame.from_dict(rows, orient="index")
