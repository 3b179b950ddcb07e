"""What TRL's default `activation_checkpointing=True` costs on a CPU, for one trainer, on or off.

TRL's configs (`RewardConfig`, `SFTConfig`, `GRPOConfig`) turn activation checkpointing on unless told
otherwise. The course's presets turn it off on a CPU; this probe measures what that is worth.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/checkpointing_probe.py reward --checkpointing on
    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/checkpointing_probe.py reward --checkpointing off

`reward`: notebook 12's reward model (the course model with a score head, the head, the final norm and the top
4 layers training) on 70 synthetic preference pairs, 2 epochs of 8 pairs a step. `sft`: a full fine-tune on the
same 70 conversations (the chosen answers), 4 steps of 16, as in notebook 10's warm start. It prints the training
time and the first losses: checkpointing recomputes the forward pass, so the losses must be the same either way.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import time

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer, set_seed
from trl import RewardConfig, RewardTrainer, SFTConfig, SFTTrainer

from course_utils.models import model_source

WORDS = "the library book answer sentence short long helpful reply product review good bad".split()


def synthetic_pairs(n: int = 70, seed: int = 0) -> Dataset:
    """n preference pairs of random words: only their lengths (about 20 and 30 words) matter for timing."""
    rng = random.Random(seed)

    def text(words: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(words))

    return Dataset.from_list([
        {"prompt": [{"role": "system", "content": "Answer in one short sentence."},
                    {"role": "user", "content": "Tell me about " + text(3)}],
         "chosen": [{"role": "assistant", "content": text(20)}],
         "rejected": [{"role": "assistant", "content": text(30)}]}
        for _ in range(n)
    ])


def train(trainer_kind: str, checkpointing: bool) -> tuple[float, list[float]]:
    """Seconds to train, and the first six logged losses."""
    source = model_source("auto", verbose=False)
    tokenizer = AutoTokenizer.from_pretrained(source)
    pairs = synthetic_pairs()
    set_seed(0)
    common = dict(output_dir="outputs/checkpointing_probe", logging_steps=1, save_strategy="no", report_to="none",
                  seed=0, disable_tqdm=True, bf16=False, activation_checkpointing=checkpointing)
    if trainer_kind == "reward":
        model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=1, dtype=torch.float32)
        model.config.pad_token_id = tokenizer.pad_token_id
        layers = model.config.num_hidden_layers
        top = [f"model.layers.{i}." for i in range(layers - 4, layers)]
        for name, parameter in model.named_parameters():
            parameter.requires_grad = name.startswith(("score", "model.norm", *top))
        args = RewardConfig(learning_rate=1e-4, num_train_epochs=2, per_device_train_batch_size=8, **common)
        trainer = RewardTrainer(model=model, args=args, processing_class=tokenizer, train_dataset=pairs)
    else:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
        conversations = pairs.map(lambda row: {"messages": row["prompt"] + row["chosen"]},
                                  remove_columns=pairs.column_names)
        args = SFTConfig(learning_rate=1e-4, max_steps=4, per_device_train_batch_size=16, **common)
        trainer = SFTTrainer(model=model, args=args, processing_class=tokenizer, train_dataset=conversations)
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        trainer.train()
    seconds = time.perf_counter() - start
    return seconds, [round(row["loss"], 4) for row in trainer.state.log_history if "loss" in row][:6]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trainer", choices=["reward", "sft"])
    parser.add_argument("--checkpointing", choices=["on", "off"], required=True)
    args = parser.parse_args()
    seconds, losses = train(args.trainer, args.checkpointing == "on")
    print(f"{args.trainer}, activation_checkpointing {args.checkpointing}: {seconds:.1f} s; first losses {losses}")


if __name__ == "__main__":
    main()
