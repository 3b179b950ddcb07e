"""Preflight: check a GRPO run's inputs before training, and say in one line what to change.

``GRPOTrainer`` accepts a lot before it fails, and when it fails the error often comes from deep inside
TRL, transformers or torch, minutes into a run. :func:`preflight` runs the checks below in a second,
before the trainer is built, and raises :class:`PreflightError` listing every problem it found:

- the dataset: a ``prompt`` column in standard or chat format, no empty rows, and every column a reward
  function asks for by name (e.g. ``answer``) present and filled;
- the rewards: each reward function called once the way ``GRPOTrainer`` calls it, on dummy completions
  of real rows, must accept TRL's keyword arguments and return one number per completion; a warning names
  the rows whose ``answer`` the course's ``parse_number`` cannot read (such a row scores 0.0 forever);
- the length budget: the longest prompt plus ``max_completion_length`` fits the model's context;
- the precision: ``bf16``/``fp16`` only where the device supports it;
- the tokenizer: a pad token, or an end-of-sequence token TRL can pad with;
- experiment tracking: each ``report_to`` backend installed, and never a login prompt mid-run.

The batch arithmetic is not among them: ``GRPOConfig`` already refuses a batch that does not add up.
:func:`check_batch` explains that rule for settings not yet in a config (notebook 03).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import copy
import functools
import importlib.util
import inspect
import math
import netrc
import numbers
import os
import random
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from datasets import Dataset

from course_utils.data import LINE_COLUMN, DatasetFormatError, validate_prompt_dataset
from course_utils.hardware import Hardware, detect_hardware
from course_utils.presets import split_batch

#: Keyword arguments GRPOTrainer passes to every reward function itself; any other named parameter of a
#: reward function is filled from the dataset column of that name.
TRL_REWARD_ARGUMENTS = frozenset(
    {"prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric", "environments"}
)


class PreflightError(ValueError):
    """A GRPO run's inputs cannot work; the message says what to change."""


class PreflightWarning(UserWarning):
    """A GRPO run will start, but part of it cannot learn; the message says which rows and what to change."""


def _reward_name(func: Any) -> str:
    """The name TRL logs a reward under (``get_callable_name``): partials unwrapped, else the class name."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def reward_columns(reward_funcs: Callable[..., Any] | Sequence[Callable[..., Any]]) -> dict[str, list[str]]:
    """Dataset columns each reward function needs: its named parameters TRL does not supply itself.

    Parameters with a default value are optional and not listed. Reward *models* (anything that is not a
    plain callable with a signature, such as a model id string) need no column and are skipped.
    """
    funcs = [reward_funcs] if callable(reward_funcs) or isinstance(reward_funcs, str) else list(reward_funcs)
    needs: dict[str, list[str]] = {}
    for func in funcs:
        if isinstance(func, str) or not callable(func):
            continue
        try:
            parameters = inspect.signature(func).parameters.values()
        except (TypeError, ValueError):  # a builtin or C callable: nothing to read
            continue
        needs[_reward_name(func)] = [
            p.name
            for p in parameters
            if p.name not in TRL_REWARD_ARGUMENTS
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
            and p.default is p.empty
        ]
    return needs


def check_dataset(dataset: Dataset, reward_funcs: Callable[..., Any] | Sequence[Callable[..., Any]] = ()) -> None:
    """The prompt column and every column a reward function reads; raises :class:`PreflightError`."""
    needs = reward_columns(reward_funcs)
    for name, columns in needs.items():
        missing = [c for c in columns if c not in dataset.column_names]
        if missing:
            raise PreflightError(
                f"Reward function {name!r} takes {missing} from the dataset, but the dataset has only "
                f"{dataset.column_names}: add the column, or give the parameter a default value."
            )
    required = sorted({c for columns in needs.values() for c in columns})
    try:
        validate_prompt_dataset(dataset, required_columns=required)
    except DatasetFormatError as error:
        raise PreflightError(str(error)) from None


#: What the reward probe passes as completions: a formatted answer, one word, a sentence, and an empty one
#: (a model can stop at once), for each of the first two rows of the dataset.
PROBE_COMPLETIONS = (
    "<reasoning>\nI add the two numbers.\n</reasoning>\n<answer>\n5\n</answer>",
    "positive",
    "I am not sure about this one.",
    "",
)


def _is_model(func: Any) -> bool:
    torch = sys.modules.get("torch")
    return isinstance(func, str) or (torch is not None and isinstance(func, torch.nn.Module))


def _probe_copy(func: Any) -> Any | None:
    """A copy to call, so the probe leaves a stateful reward (a callable object) as it was; None if uncopyable."""
    torch = sys.modules.get("torch")
    if torch is not None and any(isinstance(v, torch.nn.Module) for v in getattr(func, "__dict__", {}).values()):
        return None  # holds a model: too large to copy, and calling it on dummy text proves little
    try:
        return copy.deepcopy(func)  # functions are returned as they are; objects and bound methods are copied
    except Exception:  # noqa: BLE001 - anything that cannot be copied is simply not called
        return None


@contextlib.contextmanager
def _random_state_kept() -> Iterator[None]:
    """Python's, NumPy's and torch's random states as they were before the block."""
    numpy, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    python_state, numpy_state = random.getstate(), numpy.random.get_state() if numpy else None
    with torch.random.fork_rng() if torch else contextlib.nullcontext():
        try:
            yield
        finally:
            random.setstate(python_state)
            if numpy:
                numpy.random.set_state(numpy_state)


def _call(func: Any, kwargs: dict[str, Any]) -> Any:
    result = func(**kwargs)
    if inspect.isawaitable(result):  # TRL awaits async rewards; a notebook may already run an event loop
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            result = pool.submit(asyncio.run, result).result()  # type: ignore[arg-type]
    return result


def probe_batch(dataset: Dataset, tokenizer: Any = None, max_steps: int = 0, rows: int = 2) -> dict[str, Any]:
    """The keyword arguments ``GRPOTrainer`` passes to a reward, for :data:`PROBE_COMPLETIONS` of the first rows.

    Like TRL (``GRPOTrainer._calculate_rewards``): ``prompts``, ``completions`` (chat messages when the prompts
    are), ``completion_ids``, every dataset column but ``prompt`` (one value per completion), ``trainer_state``
    and the logging callbacks ``log_extra`` and ``log_metric`` (which record nothing here).
    """
    from transformers import TrainerState

    examples = [dataset[i] for i in range(min(rows, len(dataset)))]
    pairs = [(example, text) for example in examples for text in PROBE_COMPLETIONS]
    chat = isinstance(examples[0]["prompt"], list)
    ids = (
        (lambda text: tokenizer(text, add_special_tokens=False)["input_ids"])
        if tokenizer is not None
        else (lambda text: list(range(len(text.split()))))
    )
    kwargs: dict[str, Any] = {
        "prompts": [example["prompt"] for example, _ in pairs],
        "completions": [[{"role": "assistant", "content": text}] if chat else text for _, text in pairs],
        "completion_ids": [ids(text) for _, text in pairs],
    }
    for column in examples[0]:
        if column not in ("prompt", "completion", "completion_ids"):
            kwargs[column] = [example[column] for example, _ in pairs]
    kwargs["trainer_state"] = TrainerState(max_steps=max_steps)
    kwargs["log_extra"] = lambda column, values: None
    kwargs["log_metric"] = lambda name, value: None
    return kwargs


def check_reward_call(func: Any, dataset: Dataset, tokenizer: Any = None, max_steps: int = 0) -> None:
    """Call one reward function once, as ``GRPOTrainer`` will, on :func:`probe_batch`; raise :class:`PreflightError`.

    Catches, before training: a reward without ``**kwargs`` (TRL passes more arguments than it names), one
    that raises on an ordinary completion (an empty one, an unformatted one), and one that returns a single
    number, a list of the wrong length, or something that is not a number. A callable object is called on a
    copy, so its state (an adaptive weight, a history) is left as it was. Reward models are not called.
    """
    if _is_model(func):
        return
    name = _reward_name(func)
    kwargs = probe_batch(dataset, tokenizer, max_steps)
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        parameters = None
    if parameters is not None and not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
        unexpected = sorted(
            k for k in kwargs if k not in parameters or parameters[k].kind is inspect.Parameter.POSITIONAL_ONLY
        )
        if unexpected:
            own = [str(p) for p in parameters.values() if p.kind is not p.VAR_POSITIONAL]
            raise PreflightError(
                f"Reward function {name!r} has no **kwargs, but GRPOTrainer passes it {unexpected} by name too "
                "(every reward gets prompts, completions, completion_ids, trainer_state, log_extra, log_metric and "
                f"each dataset column): add **kwargs, as in def {name}({', '.join([*own, '**kwargs'])})."
            )
    positional = [
        n for n, p in (parameters or {}).items() if p.kind is inspect.Parameter.POSITIONAL_ONLY and p.default is p.empty
    ]
    if positional:
        raise PreflightError(
            f"Reward function {name!r} takes {positional} positionally only (before '/'), but GRPOTrainer passes "
            "every argument by name: remove the '/' from its parameters."
        )
    probe = _probe_copy(func)
    if probe is None:
        return
    with _random_state_kept():  # a reward that draws random numbers must not shift the run's random stream
        try:
            result = _call(probe, kwargs)
        except Exception as error:  # noqa: BLE001 - any failure of the learner's function is reported, with its line
            raise PreflightError(_describe_failure(name, func, error, kwargs)) from None
    _check_rewards_returned(name, result, len(kwargs["completions"]))


def _describe_failure(name: str, func: Any, error: Exception, kwargs: dict[str, Any]) -> str:
    """Which completion makes the reward fail (called one at a time, on copies), and the reward's line that raised."""
    frames = traceback.extract_tb(error.__traceback__)
    code = _code(func)
    own = [f for f in frames if code is not None and f.filename == code.co_filename]
    frame = (own or frames)[-1]
    culprit = ""
    for i, completion in enumerate(kwargs["completions"]):
        single = {k: v[i : i + 1] if isinstance(v, list) else v for k, v in kwargs.items()}
        probe = _probe_copy(func)
        if probe is None:
            break
        try:
            _call(probe, single)
        except Exception:  # noqa: BLE001
            culprit = f" on the completion {completion!r}"
            break
    at = f"at `{frame.line.strip()}`" if frame.line else f"in {frame.name}, line {frame.lineno}"
    if isinstance(error, KeyError):
        columns = [k for k in kwargs if k not in TRL_REWARD_ARGUMENTS]
        hint = f"TRL passes the dataset's columns {columns} and {sorted(TRL_REWARD_ARGUMENTS - {'environments'})}."
    elif isinstance(kwargs["completions"][0], list) and "'list'" in str(error):
        hint = (
            "The prompts are chat messages, so each completion is a list of messages, not a string: read its "
            "text with completion[-1]['content'] (or course_utils.rewards.completion_text)."
        )
    else:
        hint = (
            "During training it will see empty, unformatted and rambling completions: make it return a number "
            "(0.0, say) for any text."
        )
    return (
        f"Reward function {name!r} raised {type(error).__name__}: {error} ({at}){culprit}, when called as "
        f"GRPOTrainer calls it. {hint}"
    )


def _check_rewards_returned(name: str, result: Any, n: int) -> None:
    where = f"Reward function {name!r} returned"
    if result is None:
        raise PreflightError(f"{where} None: return a list with one float per completion (is a `return` missing?).")
    if isinstance(result, numbers.Number) or getattr(result, "ndim", None) == 0:
        raise PreflightError(
            f"{where} {result!r}, a single value, for {n} completions: GRPOTrainer calls a reward with the whole "
            "batch and needs a list with one float per completion, e.g. return [score(c) for c in completions]."
        )
    if isinstance(result, (str, bytes, dict)) or not isinstance(result, Iterable):
        raise PreflightError(f"{where} a {type(result).__name__}: return a list with one float per completion.")
    values = list(result)
    if len(values) != n:
        raise PreflightError(
            f"{where} {len(values)} reward(s) for {n} completions: return exactly one per completion, in order "
            "(TRL passes the whole batch, and dataset columns as lists of the same length)."
        )
    for i, value in enumerate(values):
        if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a 0-d tensor or array
            value = value.item()
        if value is None:
            continue  # TRL reads None as "does not apply to this completion"
        if isinstance(value, str) or not isinstance(value, numbers.Real):
            raise PreflightError(
                f"{where} {value!r} ({type(value).__name__}) for completion {i}: each reward must be a number "
                "(or None where the reward does not apply)."
            )
        if math.isinf(value):
            raise PreflightError(
                f"{where} {value} for completion {i}: one infinite reward makes every advantage in its group NaN; "
                "cap it at a finite value."
            )


#: The dataset column the course's answer rewards compare with.
ANSWER_COLUMN = "answer"


def _code(func: Any) -> types.CodeType | None:
    """The code object behind a reward: a function, a partial, a bound method or a callable object."""
    while isinstance(func, functools.partial):
        func = func.func
    func = getattr(func, "__func__", func)  # a bound method
    code = getattr(func, "__code__", None)
    if code is None and callable(func):  # a callable object: its class's __call__
        code = getattr(type(func).__call__, "__code__", None)
    return code


def _code_names(func: Any) -> set[str]:
    """Names the reward's code (nested functions included) uses: globals, attributes, parameters and locals."""
    code = _code(func)
    names: set[str] = set()
    stack = [code] if code is not None else []
    while stack:
        current = stack.pop()
        names.update(current.co_names, current.co_varnames)
        stack.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return names


def check_answers_parse(dataset: Dataset, reward_funcs: Callable[..., Any] | Sequence[Callable[..., Any]]) -> list[str]:
    """Warnings for rows whose ``answer`` the course's ``parse_number`` cannot read, per reward that relies on it.

    A reward that compares the model's number with ``parse_number(answer)`` scores 0.0 on such a row whatever
    the model writes (``"five"``, ``"1,8"``, ``"7 apples"``). Only rewards whose code calls ``parse_number`` and
    reads ``answer`` are concerned; the check does not raise, since a reward may read answers its own way.
    """
    from course_utils.rewards import parse_number

    if ANSWER_COLUMN not in dataset.column_names:
        return []
    funcs = [reward_funcs] if callable(reward_funcs) else list(reward_funcs)
    readers = [f for f in funcs if not _is_model(f) and {"parse_number", ANSWER_COLUMN} <= _code_names(f)]
    if not readers:
        return []
    unreadable = [(i, v) for i, v in enumerate(dataset[ANSWER_COLUMN]) if parse_number(str(v)) is None]
    if not unreadable:
        return []
    shown = ", ".join(f"row {i} {v!r}" for i, v in unreadable[:5]) + (
        f" and {len(unreadable) - 5} more" if len(unreadable) > 5 else ""
    )
    return [
        f"Reward function {_reward_name(f)!r}: column {ANSWER_COLUMN!r} holds {len(unreadable)} value(s) that "
        f"parse_number cannot read as one number ({shown}), so this reward will score 0.0 forever on those rows. "
        "Write each answer as a plain number (5, -3, 1.8, 1,234), or drop those rows."
        for f in readers
    ]


def check_batch(
    num_generations: int,
    per_device_train_batch_size: int,
    steps_per_generation: int = 1,
    num_processes: int = 1,
) -> None:
    """:func:`course_utils.presets.split_batch`'s rule for a per-device batch, raising :class:`PreflightError`.

    ``GRPOConfig`` itself refuses a batch that breaks it; this says the same in terms of the settings, with the fix.
    """
    try:
        split_batch(per_device_train_batch_size * num_processes, num_generations, num_processes, steps_per_generation)
    except ValueError as error:
        raise PreflightError(str(error)) from None


def check_precision(bf16: bool, fp16: bool, hardware: Hardware | None = None) -> None:
    """``bf16``/``fp16`` only where the device supports them (GRPOConfig's ``bf16`` defaults to True)."""
    hardware = hardware or detect_hardware()
    if bf16 and fp16:
        raise PreflightError("bf16=True and fp16=True: choose one (bf16 on Ampere or newer, fp16 on a T4).")
    if fp16 and hardware.kind == "cpu":
        raise PreflightError("fp16=True needs a CUDA GPU, and none was found: pass fp16=False on the CPU.")
    if bf16 and hardware.kind == "t4":
        raise PreflightError(
            f"bf16=True, but {hardware.name} has no bfloat16 support (GRPOConfig turns bf16 on by default): "
            "pass bf16=False, fp16=True."
        )


def check_pad_token(tokenizer: Any) -> None:
    """Batched generation pads prompts: the tokenizer needs a pad token, or an EOS token to pad with."""
    if getattr(tokenizer, "pad_token", None) is None and getattr(tokenizer, "eos_token", None) is None:
        raise PreflightError(
            "The tokenizer has neither a pad token nor an end-of-sequence token, so prompts cannot be batched: "
            "tokenizer.add_special_tokens({'pad_token': '<pad>'}) and model.resize_token_embeddings(len(tokenizer))."
        )


#: report_to backends the course knows how to check: the package each needs.
TRACKING_PACKAGES = {"wandb": "wandb", "trackio": "trackio", "tensorboard": "tensorboard", "mlflow": "mlflow"}


def _wandb_logged_in() -> bool:
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_MODE", "").lower() in {"offline", "disabled", "dryrun"}:
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (FileNotFoundError, netrc.NetrcParseError):
        return False


def check_tracking(report_to: str | Sequence[str] | None) -> None:
    """Each ``report_to`` backend is installed, and wandb will not stop the lesson to ask for a login."""
    backends = [report_to] if isinstance(report_to, str) or report_to is None else list(report_to)
    for backend in backends:
        if backend in (None, "none"):
            continue
        if backend == "all":
            raise PreflightError('report_to="all" logs to every tracker installed: name the one you want, or "none".')
        package = TRACKING_PACKAGES.get(backend)
        if package is None:
            continue  # a backend transformers knows and the course does not check
        if importlib.util.find_spec(package) is None:
            raise PreflightError(
                f'report_to="{backend}" needs the {package} package: pip install {package}, or use "none".'
            )
        if backend == "wandb" and not _wandb_logged_in():
            raise PreflightError(
                'report_to="wandb" would stop training to ask for a login: run `wandb login` before the lesson, '
                'set WANDB_MODE=offline, or use report_to="trackio" (local, no account) or "none".'
            )


AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")  # GRPOConfig.multi_objective_aggregation, TRL 1.16


def check_aggregation(aggregation: str) -> None:
    """``multi_objective_aggregation`` is one TRL knows (TRL itself would only say so at the first step).

    >>> check_aggregation("normalize_then_sum")
    """
    if aggregation not in AGGREGATIONS:
        raise PreflightError(
            f"multi_objective_aggregation={aggregation!r} is not one TRL knows: use \"sum_then_normalize\" (TRL's "
            f'default: weighted sum, then the group advantage) or "normalize_then_sum" (GDPO: each reward '
            f"normalised within its group, then weighted and summed)."
        )


def prompt_token_counts(dataset: Dataset, tokenizer: Any) -> list[int]:
    """Tokens in each row's prompt as the model will see it (chat template applied to chat prompts)."""
    counts = []
    for prompt in dataset["prompt"]:
        if isinstance(prompt, list):
            prompt = tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        counts.append(len(tokenizer(prompt, add_special_tokens=False)["input_ids"]))
    return counts


def check_length_budget(
    dataset: Dataset, tokenizer: Any, max_completion_length: int, context_length: int | None
) -> int:
    """The longest prompt plus ``max_completion_length`` must fit ``context_length``; returns the longest prompt.

    Current TRL does not truncate prompts (``max_prompt_length`` is gone), so a prompt that leaves no room
    fails inside generation, or silently produces completions cut off after a few tokens.
    """
    counts = prompt_token_counts(dataset, tokenizer)
    longest = max(counts)
    if context_length is not None and longest + max_completion_length > context_length:
        row = counts.index(longest)
        others = sum(n + max_completion_length > context_length for n in counts) - 1
        where = f"Row {row}"
        if LINE_COLUMN in dataset.column_names:  # rows read by course_utils.data.load_rows know their file line
            where += f" (line {dataset[row][LINE_COLUMN]} of the file)"
        raise PreflightError(
            f"{where}: the prompt has {longest} tokens, and with max_completion_length={max_completion_length} "
            f"that exceeds the model's context of {context_length} tokens"
            f"{f' ({others} more row(s) too)' if others else ''}. Shorten or drop long prompts (filter rows with "
            f"more than {context_length - max_completion_length} prompt tokens), or lower max_completion_length."
        )
    return longest


def context_length(model: Any = None, tokenizer: Any = None) -> int | None:
    """The model's context window, from its config (else the tokenizer's limit); None when unknown."""
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    if value is None and tokenizer is not None:
        value = getattr(tokenizer, "model_max_length", None)
    if value is None or value > 10_000_000:  # tokenizers without a limit report a huge sentinel
        return None
    return int(value)


def preflight(
    args: Any,
    train_dataset: Dataset,
    tokenizer: Any,
    reward_funcs: Callable[..., Any] | Iterable[Callable[..., Any]],
    model: Any = None,
    hardware: Hardware | None = None,
) -> str:
    """Run every check for a ``GRPOConfig`` and its inputs; raise :class:`PreflightError` listing all problems.

    Returns a one-line summary when everything is in order. Call it just before ``GRPOTrainer(...)``.
    """
    reward_funcs = [reward_funcs] if callable(reward_funcs) else list(reward_funcs)
    problems: list[str] = []
    longest = None

    def attempt(check: Callable[..., Any], *check_args: Any) -> Any:
        try:
            return check(*check_args)
        except PreflightError as error:
            problems.append(str(error))
            return None

    attempt(check_dataset, train_dataset, reward_funcs)
    dataset_ok = not problems
    # No batch check here: GRPOConfig refused a batch that does not add up before this could run (check_batch
    # says the same for settings not yet in a config, as notebook 03 shows).
    attempt(check_precision, bool(args.bf16), bool(args.fp16), hardware)
    attempt(check_pad_token, tokenizer)
    attempt(check_tracking, args.report_to)
    attempt(check_aggregation, getattr(args, "multi_objective_aggregation", AGGREGATIONS[0]))
    cautions: list[str] = []
    if dataset_ok:
        longest = attempt(
            check_length_budget, train_dataset, tokenizer, args.max_completion_length, context_length(model, tokenizer)
        )
        for func in reward_funcs:
            attempt(check_reward_call, func, train_dataset, tokenizer, max(args.max_steps, 0))
        cautions = check_answers_parse(train_dataset, reward_funcs)
    for caution in cautions:
        warnings.warn(caution, PreflightWarning, stacklevel=2)
    if problems:
        listed = "\n".join(f"  {i}. {p}" for i, p in enumerate(problems, 1))
        raise PreflightError(f"{len(problems)} problem(s) before training:\n{listed}")
    return (
        f"preflight ok: {len(train_dataset)} prompts (longest {longest} tokens + {args.max_completion_length} "
        f"completion tokens), groups of {args.num_generations}, "
        f"{'bf16' if args.bf16 else 'fp16' if args.fp16 else 'float32'}, "
        f"reward columns {sorted({c for cs in reward_columns(reward_funcs).values() for c in cs}) or 'none'}, "
        f"rewards called on {min(2, len(train_dataset)) * len(PROBE_COMPLETIONS)} dummy completions"
        + (f"; {len(cautions)} warning(s) above" if cautions else "")
    )
