#!/usr/bin/env python
"""Notebook 12's reward-model recipe search: which gold reward a reward model can learn from a few dozen pairs.

    python benchmarks/reward_model_probe.py GOLD,MIN_GAP,PAIRS_PER_PROMPT,LR,EPOCHS,TOP_LAYERS [...]

Each spec trains one reward model with ``RewardTrainer`` on pairs from 48 training prompts (4 sampled
completions each, labelled by the gold reward; ``PAIRS_PER_PROMPT`` 0 keeps every pair) and measures it on every
pair of the 40 held-out prompts, whose topics it never saw: pairwise accuracy, and the Spearman correlation of
its score with the gold score and with the length. ``GOLD`` is ``len`` (1 at 100 characters, 0 at 50 either
side: notebook 12's gold) or ``both`` (half that, half "says something about the topic", notebook 07's
``says_something_about``). ``TOP_LAYERS`` 0 trains every weight; N trains the score head and the top N layers.

Measured on the 2-core machine (embedded SmolLM2-135M-Instruct, float32, seed 0; 2026-11-24; the same code run
from a scratch copy before it was committed here):

    both,0.1,1,5e-5,2,0   42 pairs,  68 s: held-out accuracy 0.54 (167 pairs); Spearman gold -0.01, length -0.54
    both,0.1,2,1e-4,2,4   84 pairs,  95 s: held-out accuracy 0.48 (167 pairs); Spearman gold -0.10, length -0.16
    both,0.1,0,1e-4,1,4  183 pairs,  97 s: held-out accuracy 0.42 (167 pairs); Spearman gold -0.20, length -0.13
    len,0.1,2,1e-4,2,4    86 pairs,  89 s: held-out accuracy 0.70 (152 pairs); Spearman gold 0.35, length -0.42

So on topics it never saw, a reward model trained on a few dozen pairs does not learn which words belong to a
topic (a coin's accuracy, 42-54%), and learns length (70%): notebook 12's gold reward is length only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time

import pandas as pd
from transformers import AutoModelForSequenceClassification, set_seed
from trl import RewardConfig, RewardTrainer

from course_utils.data import length_prompts
from course_utils.evaluation import generate, says_something_about
from course_utils.models import load_model, model_source
from course_utils.reward_models import pairwise_accuracy, preference_pairs, reward_scores

SEED, TARGET, N_TRAIN, SAMPLES, TOKENS = 0, 100, 48, 4, 32


def gold_score(text: str, topic: str, gold: str) -> float:
    length = max(0.0, 1 - abs(len(text) - TARGET) / 50)
    return length if gold == "len" else 0.5 * says_something_about(text, topic) + 0.5 * length


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("specs", nargs="+", help="GOLD,MIN_GAP,PAIRS_PER_PROMPT,LR,EPOCHS,TOP_LAYERS")
    args = parser.parse_args()
    data = length_prompts(seed=SEED, n_test=40, system_prompt="Answer in one short sentence.")
    model, tokenizer = load_model("auto", verbose=False)

    def sample(prompts):
        runs = [generate(model, tokenizer, prompts, max_new_tokens=TOKENS, batch_size=64, do_sample=True,
                         seed=SEED + j, progress=False).completions for j in range(SAMPLES)]  # fmt: skip
        return [list(texts) for texts in zip(*runs, strict=True)]

    train_rows = data["train"].select(range(N_TRAIN))
    train_samples, test_samples = sample(train_rows["prompt"]), sample(data["test"]["prompt"])
    for spec in args.specs:
        gold, gap, cap, lr, epochs, top = spec.split(",")

        def pairs(rows, samples, cap, gold=gold, gap=gap):
            scores = [
                [gold_score(t, topic, gold) for t in texts] for texts, topic in zip(samples, rows["topic"], strict=True)
            ]
            return preference_pairs(
                rows["prompt"], samples, scores, min_gap=float(gap), max_pairs_per_prompt=cap or None
            )

        train_pairs, test_pairs = pairs(train_rows, train_samples, int(cap)), pairs(data["test"], test_samples, 0)
        set_seed(SEED)
        rm = AutoModelForSequenceClassification.from_pretrained(model_source("auto", verbose=False), num_labels=1)
        rm.config.pad_token_id = tokenizer.pad_token_id
        if int(top):
            n = rm.config.num_hidden_layers
            trained = ("score", "model.norm", *(f"model.layers.{i}." for i in range(n - int(top), n)))
            for name, parameter in rm.named_parameters():
                parameter.requires_grad = name.startswith(trained)
        config = RewardConfig(output_dir="/tmp/reward_model_probe", learning_rate=float(lr),
                              num_train_epochs=float(epochs), per_device_train_batch_size=8,
                              save_strategy="no", report_to="none", seed=SEED,
                              disable_tqdm=True, bf16=False)  # fmt: skip
        start = time.perf_counter()
        trainer = RewardTrainer(model=rm, args=config, processing_class=tokenizer,
                                train_dataset=train_pairs.select_columns(["prompt", "chosen", "rejected"]))  # fmt: skip
        with contextlib.redirect_stdout(io.StringIO()):
            trainer.train()
        seconds = time.perf_counter() - start
        rm.eval()
        accuracy = statistics.fmean(pairwise_accuracy(rm, tokenizer, test_pairs))
        test = zip(data["test"]["prompt"], test_samples, data["test"]["topic"], strict=True)
        flat = [(p, t, topic) for p, texts, topic in test for t in texts]
        score = pd.Series(reward_scores(rm, tokenizer, [f[0] for f in flat], [f[1] for f in flat])).rank()
        golds = pd.Series([gold_score(t, topic, gold) for _, t, topic in flat]).rank()
        lengths = pd.Series([len(t) for _, t, _ in flat]).rank()
        print(
            f"{spec}: {len(train_pairs)} pairs, {seconds:.0f} s: held-out accuracy {accuracy:.2f} ({len(test_pairs)} "
            f"pairs); Spearman gold {score.corr(golds):.2f}, length {score.corr(lengths):.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
