"""Learned rewards (notebook 12): preference pairs, a reward model's scores, and a conservative ensemble.

A reward model here is what TRL's ``RewardTrainer`` trains and ``GRPOTrainer`` accepts in ``reward_funcs``:
a sequence classifier with one output. :func:`reward_scores` scores completions exactly as
``GRPOTrainer`` does (chat template over prompt and completion, right padding, the first logit), so a
score printed in a notebook is the score training saw: in float32 (under bf16 or fp16 training, ``GRPOTrainer``
scores a reward model it loaded inside its autocast, so its logged scores differ from these by that rounding).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

import torch
from datasets import Dataset
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from course_utils.evaluation import weights_precision
from course_utils.rewards import Completion, completion_text

Messages = list[dict[str, str]]
COMBINES = ("mean", "min", "mean_minus_std")


def preference_pairs(
    prompts: Sequence[Messages],
    completions: Sequence[Sequence[str]],
    scores: Sequence[Sequence[float]],
    *,
    min_gap: float,
    max_pairs_per_prompt: int | None = None,
) -> Dataset:
    """Preference pairs labelled by a trusted score: for each prompt, every two of its completions whose scores
    differ by at least ``min_gap`` (the higher one is ``chosen``). Ties and near-ties are dropped, as a human
    labeller would skip them; identical completions never make a pair.

    ``completions[i]`` and ``scores[i]`` belong to ``prompts[i]``. The result is TRL's conversational
    preference format (``prompt``, ``chosen``, ``rejected``) plus ``prompt_index``, ``chosen_score`` and
    ``rejected_score``, so held-out accuracy can be resampled by prompt.

    >>> hi = [{"role": "user", "content": "Hi"}]
    >>> pairs = preference_pairs([hi], [["a", "b", "c"]], [[0.0, 1.0, 0.95]], min_gap=0.5)
    >>> [(p["chosen"][0]["content"], p["rejected"][0]["content"]) for p in pairs]
    [('b', 'a'), ('c', 'a')]
    """
    if min_gap <= 0:
        raise ValueError(f"min_gap={min_gap}: give a positive gap (a pair of equal scores has no preferred side).")
    if not len(prompts) == len(completions) == len(scores):
        raise ValueError(
            f"got {len(prompts)} prompts, {len(completions)} completion lists and {len(scores)} score lists:"
            " give one list of completions and one of scores per prompt."
        )
    rows: list[dict[str, Any]] = []
    for i, (prompt, texts, values) in enumerate(zip(prompts, completions, scores, strict=True)):
        if len(texts) != len(values):
            raise ValueError(f"prompt {i}: {len(texts)} completions but {len(values)} scores; give one score each.")
        found = []
        for a in range(len(texts)):
            for b in range(a + 1, len(texts)):
                if texts[a] == texts[b] or abs(values[a] - values[b]) < min_gap:
                    continue
                hi, lo = (a, b) if values[a] > values[b] else (b, a)
                found.append(
                    {
                        "prompt": list(prompt),
                        "chosen": [{"role": "assistant", "content": texts[hi]}],
                        "rejected": [{"role": "assistant", "content": texts[lo]}],
                        "prompt_index": i,
                        "chosen_score": float(values[hi]),
                        "rejected_score": float(values[lo]),
                    }
                )
        rows.extend(found[:max_pairs_per_prompt])
    if not rows:
        raise ValueError(
            f"no two completions of any prompt differ by min_gap={min_gap}: lower min_gap, or sample "
            "more completions per prompt (or at a higher temperature)."
        )
    return Dataset.from_list(rows)


def reward_scores(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    prompts: Sequence[Messages],
    completions: Sequence[Completion],
    batch_size: int = 32,
) -> list[float]:
    """A reward model's score for each (prompt, completion), computed as ``GRPOTrainer`` computes it.

    ``completions`` may be strings or TRL's conversational completions (a list holding one message). Each distinct
    text is scored once, in batches of similar lengths (little padding); the scores come back in the given order.
    """
    if len(prompts) != len(completions):
        raise ValueError(
            f"got {len(prompts)} prompts and {len(completions)} completions: give one completion per prompt."
        )
    texts = [
        tokenizer.apply_chat_template([*p, {"role": "assistant", "content": completion_text(c)}], tokenize=False)
        for p, c in zip(prompts, completions, strict=True)
    ]
    distinct = sorted(set(texts), key=lambda text: (len(text), text))  # a duplicate costs nothing; similar lengths
    device = next(model.parameters()).device
    scores: list[float] = []
    with torch.inference_mode(), weights_precision(model):  # float32 also after a bf16/fp16 RewardTrainer
        for start in range(0, len(distinct), batch_size):
            batch = tokenizer(
                text=distinct[start : start + batch_size],
                return_tensors="pt",
                padding=True,
                padding_side="right",
                add_special_tokens=False,
            ).to(device)
            scores.extend(model(**batch).logits[:, 0].float().tolist())
    by_text = dict(zip(distinct, scores, strict=True))
    return [by_text[text] for text in texts]


def combine_scores(
    member_scores: Sequence[Sequence[float]], combine: str = "mean_minus_std", k: float = 1.0
) -> list[float]:
    """One score per completion from several reward models' scores (``member_scores[m][j]``: model m, completion j).

    ``"mean"`` averages; ``"min"`` keeps the most pessimistic member; ``"mean_minus_std"`` subtracts ``k`` times
    the members' spread (population standard deviation), so a completion the members disagree on scores lower.

    >>> combine_scores([[1.0, 2.0], [3.0, 2.0]], "mean_minus_std")  # means 2, 2; spreads 1, 0
    [1.0, 2.0]
    >>> combine_scores([[1.0, 2.0], [3.0, 2.0]], "min")
    [1.0, 2.0]
    """
    if combine not in COMBINES:
        raise ValueError(f"combine={combine!r}: use one of {COMBINES}.")
    if not member_scores or len({len(s) for s in member_scores}) != 1:
        raise ValueError("give each member's scores for the same completions (equal, non-empty lists).")
    per_completion = list(zip(*member_scores, strict=True))
    if combine == "min":
        return [min(values) for values in per_completion]
    means = [statistics.fmean(values) for values in per_completion]
    if combine == "mean":
        return means
    return [m - k * statistics.pstdev(values) for m, values in zip(means, per_completion, strict=True)]


class EnsembleReward:
    """Several reward models as one reward function for ``GRPOTrainer``, combined by :func:`combine_scores`.

    Each member is scored as TRL scores a single reward model (:func:`reward_scores`), then put on a common
    scale: minus its mean, divided by its spread (population standard deviation), both measured once on the
    ``reference`` completions. The Bradley-Terry loss fixes only score *differences*, so each member's offset
    and scale are arbitrary; combined raw, "min" or "mean_minus_std" mostly picks whichever member happens to
    score lower everywhere, and the ensemble trains exactly as that one model would (notebook 12, seed 707,
    before this scaling). TRL logs the reward as ``rewards/ensemble_reward/mean``.

    >>> reference = (base_prompts, base_completions)  # e.g. the start model's samples  # doctest: +SKIP
    >>> reward = EnsembleReward([rm_a, rm_b], tokenizer, reference=reference)  # doctest: +SKIP
    >>> GRPOTrainer(model=policy, reward_funcs=reward, ...)  # doctest: +SKIP
    """

    __name__ = "ensemble_reward"

    def __init__(
        self,
        models: Sequence[PreTrainedModel],
        tokenizer: PreTrainedTokenizerBase,
        combine: str = "mean_minus_std",
        k: float = 1.0,
        *,
        reference: tuple[Sequence[Messages], Sequence[Completion]],
    ):
        if len(models) < 2:
            raise ValueError(f"an ensemble needs at least 2 reward models, got {len(models)}.")
        combine_scores([[0.0]] * len(models), combine, k)  # the same error as at call time, raised now
        self.models, self.tokenizer, self.combine, self.k = list(models), tokenizer, combine, k
        prompts, completions = reference
        if len(prompts) < 2 or len(prompts) != len(completions):
            raise ValueError(f"reference: give at least 2 (prompt, completion) pairs, as two lists of equal length; "
                             f"got {len(prompts)} prompts and {len(completions)} completions.")  # fmt: skip
        self.scales = []
        for m, model in enumerate(self.models):
            raw = reward_scores(model, tokenizer, prompts, completions)
            spread = statistics.pstdev(raw)
            # float32 can score one text a rounding error apart in two rows of a batch (1.5e-8 apart on some CPUs):
            # a spread at that level is no spread, and dividing by it would blow the scores up
            if spread <= 1e-6 * max(1.0, max(abs(score) for score in raw)):
                raise ValueError(
                    f"member {m} gives every reference completion the same score ({raw[0]:.4g}), "
                    "so it cannot be put on a common scale: pass reference completions that differ."
                )
            self.scales.append((statistics.fmean(raw), spread))

    def member_scores(self, prompts: Sequence[Messages], completions: Sequence[Completion]) -> list[list[float]]:
        """Each member's scores on the common scale: ``[model][completion]``, in reference spreads from its mean."""
        return [
            [(score - mean) / spread for score in reward_scores(model, self.tokenizer, prompts, completions)]
            for model, (mean, spread) in zip(self.models, self.scales, strict=True)
        ]

    def __call__(self, prompts: Sequence[Messages], completions: Sequence[Completion], **kwargs: Any) -> list[float]:
        return combine_scores(self.member_scores(prompts, completions), self.combine, self.k)

    def __repr__(self) -> str:
        return f"EnsembleReward({len(self.models)} models, combine={self.combine!r}, k={self.k})"


def pairwise_accuracy(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, pairs: Dataset) -> list[float]:
    """Per pair, 1.0 when the reward model scores ``chosen`` above ``rejected``, else 0.0."""
    chosen = reward_scores(model, tokenizer, pairs["prompt"], pairs["chosen"])
    rejected = reward_scores(model, tokenizer, pairs["prompt"], pairs["rejected"])
    return [1.0 if c > r else 0.0 for c, r in zip(chosen, rejected, strict=True)]
