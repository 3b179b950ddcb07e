"""Are a trained model's repeated held-out answers copies across topics (collapse) or within one topic?

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/distinct_by_topic.py --seed 0 --steps 40 --n-eval 120

Trains notebook 01's recipe at the ``cpu`` preset's sizes for ``--steps`` steps, answers ``--n-eval`` held-out
prompts greedily with the ``gpu`` preset's token budget (120 is every one: 15 topics in 8 phrasings each, what
the ``gpu`` preset evaluates), and counts each repeated answer's extra copies given to the same topic and to
other topics. It also prints the ``distinct_share`` of ``length_report`` with and without the topics. Written
for the H100 runs of 2026-11-27 (docs/BENCHMARKS.md, "Fourth lease"), where 01, 05 and 11 ended 58-75% distinct
at 40 steps.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from transformers import AutoTokenizer, set_seed  # noqa: E402
from trl import GRPOTrainer  # noqa: E402

from course_utils.data import length_prompts  # noqa: E402
from course_utils.evaluation import generate, length_report  # noqa: E402
from course_utils.models import model_source  # noqa: E402
from course_utils.presets import PRESETS  # noqa: E402
from course_utils.recipes import BETA, LEARNING_RATE, SYSTEM_PROMPT, TARGET_CHARS, length_recipe_config  # noqa: E402
from course_utils.rewards import make_length_reward  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--n-eval", type=int, default=120)
    parser.add_argument("--output-dir", default="outputs/distinct_by_topic")
    args = parser.parse_args(argv)
    preset = PRESETS["cpu"]
    set_seed(args.seed)
    data = length_prompts(seed=args.seed, n_test=args.n_eval, system_prompt=SYSTEM_PROMPT)
    source = model_source("auto", verbose=False)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    config = length_recipe_config(preset, args.output_dir, learning_rate=LEARNING_RATE, beta=BETA, seed=args.seed,
                                  max_steps=args.steps, use_cpu=True)  # fmt: skip
    reward = make_length_reward(TARGET_CHARS, max_completion_length=preset.max_completion_length)
    trainer = GRPOTrainer(model=source, reward_funcs=reward, args=config, train_dataset=data["train"],
                          processing_class=tokenizer)  # fmt: skip
    start = time.perf_counter()
    trainer.train()
    answers, finished = generate(trainer.model, tokenizer, data["test"]["prompt"],
                                 max_new_tokens=PRESETS["gpu"].max_completion_length, batch_size=60,
                                 progress=False)  # fmt: skip
    topics = data["test"]["topic"]
    per_text: dict[str, Counter] = {}
    for text, topic in zip(answers, topics, strict=True):
        per_text.setdefault(text, Counter())[topic] += 1
    result = {
        "seed": args.seed, "steps": args.steps, "n_eval": args.n_eval,
        "train_seconds": round(time.perf_counter() - start),
        "length_error": length_report(answers, TARGET_CHARS, finished)["length_error"].mean,
        "distinct_share_all_prompts": length_report(answers, TARGET_CHARS)["distinct_share"],
        "distinct_share_across_topics": length_report(answers, TARGET_CHARS, topics=topics)["distinct_share"],
        "extra_copies_same_topic": sum(c.total() - len(c) for c in per_text.values()),  # repeats inside a topic
        "extra_copies_other_topics": sum(len(c) - 1 for c in per_text.values()),  # further topics a text went to
        "repeated": {text: dict(c) for text, c in per_text.items() if c.total() > 1},
    }  # fmt: skip
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
