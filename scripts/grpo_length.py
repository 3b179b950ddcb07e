"""Notebook 01's GRPO recipe as a script, for `accelerate launch` on one CPU process or on several GPUs.

One CPU process, and two data-parallel CPU processes (what notebook 09 and CI run):

    accelerate launch --cpu --num_processes 1 scripts/grpo_length.py --preset cpu-ci
    OMP_NUM_THREADS=1 torchrun --nproc_per_node 2 scripts/grpo_length.py --preset cpu-ci --max-steps 2

Eight GPUs on one machine, data parallel, DeepSpeed ZeRO-2 or FSDP:

    accelerate launch --config_file configs/accelerate/ddp.yaml scripts/grpo_length.py --preset gpu
    accelerate launch --config_file configs/accelerate/deepspeed_zero2.yaml scripts/grpo_length.py --preset gpu
    accelerate launch --config_file configs/accelerate/fsdp.yaml scripts/grpo_length.py --preset gpu

(the configs say 8 processes; `--num_processes N` overrides that).

The preset's batch is the *global* batch: with N processes each one gets 1/N of it, so the recipe (prompts per
step, group size, learning rate) is the same whatever N is. The script measures the held-out length error before
and after training and writes ``<output-dir>/results.json`` from the main process; a folder that already holds one
is refused before anything loads, so an earlier run's results are never overwritten. After training under FSDP each
process holds only a shard of the weights and every forward pass needs every process, so all of them measure then.
DeepSpeed ZeRO-3 shards the weights as they load, before the first measurement, and is refused: use ZeRO-2 or FSDP.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repository

import torch  # noqa: E402
from accelerate import PartialState  # noqa: E402
from transformers import AutoTokenizer, set_seed  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from course_utils.data import length_prompts  # noqa: E402
from course_utils.evaluation import generate, length_report  # noqa: E402
from course_utils.hardware import Hardware, detect_hardware  # noqa: E402
from course_utils.models import model_source  # noqa: E402
from course_utils.preflight import PreflightError, check_tracking  # noqa: E402
from course_utils.presets import Preset, get_preset, split_batch  # noqa: E402
from course_utils.recipes import BETA, LEARNING_RATE, SYSTEM_PROMPT, TARGET_CHARS, length_recipe_config  # noqa: E402
from course_utils.rewards import make_length_reward  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="auto", help="cpu-ci, cpu, t4, gpu or auto (default)")
    parser.add_argument("--model-name", default="auto", help="auto (embedded offline, Hub online), a Hub id or a path")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-steps", type=int, default=None, help="default: the preset's")
    parser.add_argument("--target-chars", type=int, default=TARGET_CHARS)
    parser.add_argument("--learning-rate", type=float, default=LEARNING_RATE)
    parser.add_argument("--beta", type=float, default=BETA)
    parser.add_argument("--use-vllm", action="store_true", help="generate with vLLM in colocate mode (GPU + vllm)")
    parser.add_argument("--report-to", default="none", help="none (default), trackio or wandb (log in first)")
    parser.add_argument(
        "--output-dir",
        default="outputs/grpo_length",
        help="a folder without a results.json (an earlier run's is never overwritten)",
    )
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace, preset: Preset, hardware: Hardware, per_device: int) -> GRPOConfig:
    """Notebook 01's GRPOConfig with this run's options and each process's share of the batch."""
    return length_recipe_config(
        preset,
        args.output_dir,
        learning_rate=args.learning_rate,
        beta=args.beta,
        report_to=args.report_to,
        seed=args.seed,
        max_steps=args.max_steps or preset.max_steps,
        per_device_train_batch_size=per_device,
        use_cpu=hardware.device == "cpu",
        model_init_kwargs={"dtype": hardware.load_dtype},
        use_vllm=args.use_vllm,
        vllm_mode="colocate",
    )


def weights_sharded(trainer: GRPOTrainer) -> bool:
    """Whether training shards the weights over the processes (FSDP): after ``train()`` each process holds a shard.

    A forward pass then gathers the weights from every process, so a measurement that only the main process ran
    would wait for the others forever. With whole weights on each process (one process, DDP, ZeRO-2) the main
    process measures alone.
    """
    return bool(getattr(trainer, "is_fsdp_enabled", False))


def main(argv: list[str] | None = None) -> dict | None:
    args = parse_args(argv)
    results_path = Path(args.output_dir) / "results.json"
    if results_path.exists():  # checked before anything loads: an earlier run's results are never overwritten
        raise SystemExit(f"--output-dir {args.output_dir} already holds an earlier run's results.json: pass a new "
                         "folder (notebook 09 passes a new one per run), or move that file.")  # fmt: skip
    if args.use_vllm and (importlib.util.find_spec("vllm") is None or not torch.cuda.is_available()):
        raise SystemExit("--use-vllm needs a CUDA GPU and the vllm package (`pip install vllm`). "
                         "Leave the flag out to generate with transformers.")  # fmt: skip
    if os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE") == "3":  # set by `accelerate launch` from the config
        raise SystemExit("DeepSpeed ZeRO-3 shards the weights as they load, and this script measures the held-out "
                         "prompts before training with whole weights: launch with configs/accelerate/"
                         "deepspeed_zero2.yaml or fsdp.yaml instead.")  # fmt: skip
    try:
        check_tracking(args.report_to)
    except PreflightError as err:
        raise SystemExit(f"--report-to: {err}") from None
    on_cpu = not torch.cuda.is_available()
    state = PartialState(cpu=on_cpu)  # set up by the launcher: process count, rank, device (gloo on CPUs)
    set_seed(args.seed)
    hardware = detect_hardware()
    preset = get_preset(args.preset, hardware)
    global_batch = preset.per_device_train_batch_size
    try:
        per_device = split_batch(global_batch, preset.num_generations, state.num_processes)
    except ValueError as err:
        raise SystemExit(f"{preset.name} preset: {err}") from None
    data = length_prompts(seed=args.seed, n_test=preset.n_eval, system_prompt=SYSTEM_PROMPT)
    with state.main_process_first():  # only one process unpacks the embedded model into the cache
        source = model_source(args.model_name, verbose=state.is_main_process)
    tokenizer = AutoTokenizer.from_pretrained(source)
    tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token

    config = build_config(args, preset, hardware, per_device)
    max_steps = config.max_steps
    trainer = GRPOTrainer(
        model=source,  # a path or Hub id: the trainer loads it on each process's own device
        reward_funcs=make_length_reward(args.target_chars, max_completion_length=preset.max_completion_length),
        args=config,
        train_dataset=data["train"],
        processing_class=tokenizer,
    )

    def held_out() -> dict:
        completions, finished = generate(
            trainer.model, tokenizer, data["test"]["prompt"], max_new_tokens=preset.max_completion_length,
            batch_size=preset.eval_batch_size, progress=False,
        )  # fmt: skip
        return length_report(completions, args.target_chars, finished, topics=data["test"]["topic"])

    before = held_out() if state.is_main_process else None  # whole weights on every process until train()
    state.wait_for_everyone()
    start = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - start
    state.wait_for_everyone()
    after = held_out() if state.is_main_process or weights_sharded(trainer) else None  # FSDP: every process
    if not state.is_main_process:
        return None
    results = {
        "preset": preset.name,
        "num_processes": state.num_processes,
        "distributed_type": str(state.distributed_type),
        "device": str(state.device),
        "per_device_train_batch_size": per_device,
        "global_batch": global_batch,
        "num_generations": preset.num_generations,
        "max_steps": max_steps,
        "use_vllm": args.use_vllm,
        "seconds_per_step": train_seconds / max_steps,
        "length_error_before": before["length_error"].mean,
        "length_error_after": after["length_error"].mean,
        "finished_share_after": after["finished_share"],
        "distinct_share_after": after["distinct_share"],
        "reward_first_step": next(r["reward"] for r in trainer.state.log_history if "reward" in r),
        "reward_last_step": [r["reward"] for r in trainer.state.log_history if "reward" in r][-1],
    }
    results_path.parent.mkdir(parents=True, exist_ok=True)
    with results_path.open("x") as f:  # "x": fails rather than overwrite a results.json written since the check above
        f.write(json.dumps(results, indent=2))
    print(f"{state.num_processes} process(es) on {state.device}, {per_device} completions per process per step")
    print(f"held-out length error {results['length_error_before']:.1f} -> {results['length_error_after']:.1f}, "
          f"{train_seconds / max_steps:.1f} s per step; results in {results_path}")  # fmt: skip
    return results


if __name__ == "__main__":
    main()
