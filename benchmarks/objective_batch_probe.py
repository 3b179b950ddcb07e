#!/usr/bin/env python
"""Notebook 11's section 5 for some objectives only, at other batch sizes: does each one beat the base model?

    python benchmarks/objective_batch_probe.py --seeds 202 303 0 --objectives DAPO CISPO SAPO \\
        --generations 8 --batch 16

Each run trains a fresh copy of the course model for ``--steps`` GRPO steps with ``num_iterations=2``, the
objective's keywords as notebook 11 writes them, learning rate 5e-5 (or ``--learning-rate``) and CI mode's
other sizes, then measures the held-out length error (greedy, 50-character target) exactly as the notebook
does, with the paired gain over the base model and its 95% bootstrap interval. Run from ``notebooks/``, one
thread (``OMP_NUM_THREADS=1``), as ``make seeds`` runs the notebook.

Measured with it on the 2-core machine (2026-11-29, two scripts side by side, 4 steps), per-objective gain in
characters (95% CI lower bound), against the notebook's 2 prompts x 4:

    --generations 8 --batch 16:  seed 202 DAPO +37.2 (+22.5), CISPO +58.5 (+40.8), SAPO +52.6 (+37.8)
                                 seed 303 DAPO +49.1 (+35.4), CISPO +51.6 (+40.2), SAPO +62.9 (+53.9)
                                 seed 0   DAPO +29.7 (+17.6), CISPO +13.3 (-3.5),  SAPO +19.5 (+5.8)
    --generations 4 --batch 16:  seed 202 DAPO +46.3 (+33.2), CISPO +57.1 (+45.5), SAPO +47.0 (+36.4)
                                 seed 303 DAPO +9.8 (-3.5),   CISPO +12.4 (+0.1),  SAPO +21.7 (+11.0)
                                 seed 0   DAPO +23.9 (+11.1), CISPO +31.3 (+18.2), SAPO +26.5 (+11.9)

70-76 s a run against 37-46 s at the notebook's 8 completions a step (docs/PROOF.md, notebook 11).

At the notebook's 8 completions a step but six steps (``--steps 6``, 52-62 s a run, 2026-11-29): seeds 0, 11
and 33 passed every objective (GSPO on seed 11 at 79% distinct answers, under the notebook's 80% guard), and
DAPO on seed 202 lost ground, -11.0 (-19.4). ``--learning-rate 1e-4`` at four steps, seed 0: CISPO -10.1
(-27.0), GRPO 71% distinct.

``--samples 4`` adds the held-out error of 4 answers per prompt sampled at temperature 1, what GRPO trains
(2026-11-30, 4 steps): seed 303 DAPO +14.9 (+9.9) and SAPO +21.4 (+13.1) where greedy gave +6.5 (-6.1) and +10.9
(+0.3); seed 202 DAPO -7.3 (-16.6), CISPO +2.5 (-6.9). docs/PROOF.md has the commands.

``--set KEY=VALUE`` changes one keyword of every objective run, to take an objective apart: ``--objectives DAPO
--set epsilon_high=0.2`` is DAPO's token-level averaging without its clip-higher (2026-11-30, 4 steps, seeds 0,
101, 202, 303: +39.0, +23.9, +1.2, +13.8 against GRPO's +53.1, +28.6, +23.8, +23.5), and ``--objectives GRPO --set
epsilon_high=0.28`` is GRPO with it (+56.8, +36.5, -9.6, +10.1). docs/PROOF.md has the table.

``clipped`` is, per sampled batch, the share of completions cut off at the token budget (TRL's
``completions/clipped_ratio``): a batch where it is 1.0 shows GRPO no shorter answer. Seed 1111, where notebook 11
learned nothing (2026-12-03, ``--seeds 1111 --objectives GRPO --bf16 [--batch 12]``): docs/PROOF.md has the runs.

``--num-iterations 1 --set steps_per_generation=4`` samples one batch of 32 for the four steps, a slice a step,
so every objective trains on the same completions (2026-12-03, seeds 0, 202, 303, 606): seed 202 learned under
all six, seed 0 lost ground under three (``clip_shares`` and ``grad_norms`` are logged per step). docs/PROOF.md.

``--topic-penalty 100`` adds notebook 07's topic reward, as notebook 11 now does, and ``--answers`` prints each
held-out answer given more than once: on seed 606 without it GSPO answered 9 of 24 "I'm glad I could help!"
(2026-12-03); with it every objective stayed distinct there. docs/PROOF.md.

``--truncated-reward -300`` scores every cut-off completion alike, as notebook 11 now does (2026-12-03, ``--bf16``,
seeds 0, 101, 202, 303, 1111): 28 of 30 runs beat the base model with the interval above 0, against 20 of 30 with
notebook 01's reward; ``--max-completion-length 48`` instead learned on 1111 and lost ground on 303. docs/PROOF.md.

``--off-topic-reward -200`` scores a finished answer that does not name its topic as that constant, and ``--eos``
counts an answer that ended with the end-of-sequence token exactly at the budget as finished (TRL's rule), as
notebook 11 now does (2026-12-03, an AMD EPYC): on bf16 seed 1111 every completion of the first batch was 32
tokens long, so without ``--eos`` every group scored alike and no objective moved (gradient 0); with it every
objective learned (+49.8 to +66.1 characters). ``--off-topic-reward -300`` fixed float32 seed 0 but left bf16
seed 303 with nothing to learn. docs/PROOF.md.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import copy
import io
import json
import statistics
import time

from transformers import set_seed
from trl import GRPOConfig, GRPOTrainer

from course_utils.data import length_prompts
from course_utils.evaluation import generate, length_report
from course_utils.hardware import detect_hardware
from course_utils.models import load_model
from course_utils.presets import get_preset
from course_utils.proof import paired_gain
from course_utils.rewards import make_length_reward, make_topic_reward, mentions_topic

OBJECTIVES = {  # notebook 11's section 2, verbatim
    "GRPO": {"loss_type": "grpo"},
    "Dr. GRPO": {"loss_type": "dr_grpo", "scale_rewards": "none"},
    "DAPO": {"loss_type": "dapo", "epsilon_high": 0.28},
    "GSPO": {"loss_type": "grpo", "importance_sampling_level": "sequence", "epsilon": 3e-4, "epsilon_high": 4e-4},
    "CISPO": {"loss_type": "cispo", "epsilon_high": 5.0},
    "SAPO": {"loss_type": "sapo"},
}
TARGET_CHARS = 50


def _keyword(text: str) -> tuple[str, object]:
    """``"epsilon_high=0.2"`` -> ``("epsilon_high", 0.2)``; a value that is not JSON stays a string."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"--set {text!r}: write KEY=VALUE, e.g. --set epsilon_high=0.2")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--objectives", nargs="+", choices=list(OBJECTIVES), default=list(OBJECTIVES))
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8, help="completions per step")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--num-iterations", type=int, default=2, help="optimizer steps per sampled batch")
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--max-completion-length", type=int, default=0, help="tokens per completion (0: cpu-ci's)")
    parser.add_argument(
        "--truncated-reward",
        type=float,
        default=None,
        help="a cut-off completion scores this constant (make_length_reward's truncated_reward); default: its "
        "distance minus the truncation penalty",
    )
    parser.add_argument(
        "--topic-penalty",
        type=float,
        default=0.0,
        help="add notebook 07's topic reward: an answer that does not name its topic scores this much less",
    )
    parser.add_argument(
        "--off-topic-reward",
        type=float,
        default=None,
        help="a finished answer that does not name its topic scores this constant (make_length_reward's "
        "off_topic_reward)",
    )
    parser.add_argument(
        "--eos",
        action="store_true",
        help="an answer that ended with the end-of-sequence token at the budget is finished (TRL's rule)",
    )
    parser.add_argument("--answers", action="store_true", help="also print each held-out answer given more than once")
    parser.add_argument("--bf16", action="store_true", help="train under bf16 autocast (a CPU with native bf16)")
    parser.add_argument(
        "--samples",
        type=int,
        default=0,
        help="also measure K answers per held-out prompt sampled at temperature 1 (0: greedy only)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one GRPOConfig keyword of every objective run (repeatable), e.g. --set epsilon_high=0.2",
    )
    args = parser.parse_args()
    overrides = dict(_keyword(text) for text in args.set)

    hardware = detect_hardware()
    sizes = get_preset("cpu-ci", hardware)
    if args.max_completion_length:
        sizes = sizes.with_overrides(max_completion_length=args.max_completion_length)
    if args.bf16:
        sizes = sizes.with_overrides(bf16=True)
    model, tokenizer = load_model("auto", hardware=hardware)
    reward = make_length_reward(
        TARGET_CHARS,
        max_completion_length=sizes.max_completion_length,
        truncated_reward=args.truncated_reward,
        off_topic_reward=args.off_topic_reward,
        eos_token_id=tokenizer.eos_token_id if args.eos else None,
    )
    rewards = [reward, make_topic_reward(args.topic_penalty)] if args.topic_penalty else reward
    for seed in args.seeds:
        set_seed(seed)
        data = length_prompts(seed=seed, n_test=sizes.n_eval, system_prompt="Answer in one short sentence.")

        def evaluate(policy, data=data, seed=seed):
            out = generate(
                policy,
                tokenizer,
                data["test"]["prompt"],
                max_new_tokens=sizes.max_completion_length,
                batch_size=sizes.eval_batch_size,
                progress=False,
            )
            report = length_report(out.completions, TARGET_CHARS, out.finished, topics=data["test"]["topic"])
            report["completions"] = list(out.completions)
            report["names_topic"] = statistics.fmean(
                mentions_topic(c, t) for c, t in zip(out.completions, data["test"]["topic"], strict=True)
            )
            if args.samples:  # per prompt, the mean error of K answers sampled as GRPO samples (temperature 1)
                k = args.samples
                prompts = [p for p in data["test"]["prompt"] for _ in range(k)]
                sampled = generate(
                    policy,
                    tokenizer,
                    prompts,
                    max_new_tokens=sizes.max_completion_length,
                    batch_size=k * sizes.eval_batch_size,
                    do_sample=True,
                    temperature=1.0,
                    seed=seed,
                    progress=False,
                )
                errors = length_report(sampled.completions, TARGET_CHARS)["errors"]
                report["sampled_errors"] = [statistics.fmean(errors[i : i + k]) for i in range(0, len(errors), k)]
            return report

        before = evaluate(model)
        for name in args.objectives:
            set_seed(seed)
            policy = copy.deepcopy(model)
            config = GRPOConfig(
                output_dir="outputs/objective_batch_probe",
                learning_rate=args.learning_rate,
                lr_scheduler_type="constant",
                max_steps=args.steps,
                num_iterations=args.num_iterations,
                num_generations=args.generations,
                per_device_train_batch_size=args.batch,
                max_completion_length=sizes.max_completion_length,
                beta=0.0,
                bf16=sizes.bf16,
                use_cpu=sizes.bf16 and hardware.kind == "cpu",  # transformers allows bf16 on a CPU only then
                fp16=sizes.fp16,
                activation_checkpointing=sizes.activation_checkpointing,  # as the notebook: off
                logging_steps=1,
                save_strategy="no",
                report_to="none",
                seed=seed,
                disable_tqdm=True,
                **{**OBJECTIVES[name], **overrides},
            )
            trainer = GRPOTrainer(
                model=policy, reward_funcs=rewards, args=config, train_dataset=data["train"], processing_class=tokenizer
            )
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                trainer.train()
            seconds = time.perf_counter() - start
            key = "completions/clipped_ratio"
            clipped = [row[key] for row in trainer.state.log_history if key in row]
            share_key = "cispo_clip_ratio" if name == "CISPO" else "clip_ratio/region_mean"
            shares = [round(row[share_key], 3) for row in trainer.state.log_history if share_key in row]
            norms = [round(row["grad_norm"], 3) for row in trainer.state.log_history if "grad_norm" in row]
            after = evaluate(policy)
            gain = paired_gain(before["errors"], after["errors"], higher_is_better=False, seed=seed)
            if args.answers:
                for text, count in collections.Counter(after["completions"]).most_common():
                    if count > 1:
                        print(f"  {name}, seed {seed}: {count} x {text!r}", flush=True)
            if args.samples:
                sampled = paired_gain(
                    before["sampled_errors"], after["sampled_errors"], higher_is_better=False, seed=seed
                )
            print(
                json.dumps(
                    {
                        "seed": seed,
                        "objective": name,
                        **({"overrides": overrides} if overrides else {}),
                        "base": round(before["length_error"].mean, 1),
                        "after": round(after["length_error"].mean, 1),
                        "gain": round(gain.mean, 1),
                        "gain_low": round(gain.low, 1),
                        "distinct": after["distinct_share"],
                        "names_topic": [round(before["names_topic"], 3), round(after["names_topic"], 3)],
                        **({"topic_penalty": args.topic_penalty} if args.topic_penalty else {}),
                        "clipped": [round(share, 3) for share in clipped],  # per sampled batch: cut off at the budget
                        "clip_shares": shares,  # per step: the share TRL logged as clipped (GSPO: completions)
                        "grad_norms": norms,
                        "seconds": round(seconds),
                        "steps": args.steps,
                        "num_iterations": args.num_iterations,
                        "learning_rate": args.learning_rate,
                        "completions_per_step": args.batch,
                        "max_completion_length": sizes.max_completion_length,
                        "bf16": sizes.bf16,
                        **({"truncated_reward": args.truncated_reward} if args.truncated_reward is not None else {}),
                        **(
                            {
                                "sampled_gain": round(sampled.mean, 1),
                                "sampled_gain_low": round(sampled.low, 1),
                                "samples": args.samples,
                            }
                            if args.samples
                            else {}
                        ),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
