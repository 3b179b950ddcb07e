"""Deterministic prompt sets the course generates itself (no Hub datasets at run time).

Everything here is seeded: the same ``seed`` gives the same rows on every machine, and the
held-out ("test") split never shares a question with the training split.

* :func:`length_prompts`: open-ended questions for the length lesson (notebook 01). Train and
  test use disjoint topics, so "held-out" means topics the model never trained on.
* :func:`arithmetic_problems`: graded arithmetic with exact integer answers (later lessons), and
  :func:`worked_examples`: formatted solutions for a supervised warm start.
* :func:`to_conversational` and :func:`validate_prompt_dataset`: TRL's conversational format,
  checked row by row with errors that name the row and the column.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

from datasets import Dataset, DatasetDict

LENGTH_TOPICS = (
    "the ocean", "a volcano", "coffee", "the moon", "bicycles", "rain", "a library", "chess",
    "bread", "music", "gravity", "a forest", "winter", "the internet", "honey", "trains",
    "clouds", "a desert", "penguins", "glass", "football", "a lighthouse", "electricity", "tea",
    "mountains", "a camera", "dreams", "salt", "bees", "a river", "the sun", "paper", "history",
    "an island", "a garden", "snow", "robots", "a castle", "maps", "fire", "rainbows", "cheese",
    "a bridge", "owls", "the wind", "a violin", "sand", "airplanes", "a museum", "chocolate",
    "whales", "a clock", "thunder", "a market", "kites", "the desert night", "a harbour",
    "volcanic islands", "butterflies", "a telescope",
)  # fmt: skip
LENGTH_TEMPLATES = (
    "Describe {t}.",
    "What is {t}?",
    "Tell me about {t}.",
    "Explain {t} to a child.",
    "Why is {t} interesting?",
    "Write something about {t}.",
    "What do you know about {t}?",
    "Share a fact about {t}.",
)

ARITHMETIC_LEVELS = ("add1", "add2", "mixed2", "word2")
_NAMES = ("Ana", "Ben", "Chen", "Dara", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo", "Kemal", "Lea")
_ITEMS = ("apples", "books", "coins", "stickers", "marbles", "pencils", "shells", "cards")


class DatasetFormatError(ValueError):
    """A dataset row is not in the shape GRPO training expects. The message names row and column."""


def length_prompts(
    n_train: int = 240, n_test: int = 40, seed: int = 0, system_prompt: str | None = None
) -> DatasetDict:
    """Open-ended prompts for the length lesson, as TRL conversational prompts.

    The topics are shuffled with ``seed`` and split so that no test topic appears in training.
    ``system_prompt``, when given, opens every conversation. Columns: ``prompt`` (list of chat
    messages) and ``topic``.
    """
    system = [{"role": "system", "content": system_prompt}] if system_prompt else []
    rng = random.Random(seed)
    topics = list(LENGTH_TOPICS)
    rng.shuffle(topics)
    n_test_topics = max(1, len(topics) // 4)
    test_topics, train_topics = topics[:n_test_topics], topics[n_test_topics:]

    def rows(topic_list: Sequence[str], n: int) -> list[dict[str, Any]]:
        pairs = [(t, tpl) for t in topic_list for tpl in LENGTH_TEMPLATES]
        rng.shuffle(pairs)
        if n > len(pairs):
            raise ValueError(f"Asked for {n} prompts but only {len(pairs)} distinct ones exist for this split.")
        return [{"prompt": [*system, {"role": "user", "content": tpl.format(t=t)}], "topic": t} for t, tpl in pairs[:n]]

    return DatasetDict({"train": Dataset.from_list(rows(train_topics, n_train)),
                        "test": Dataset.from_list(rows(test_topics, n_test))})  # fmt: skip


def _problem(level: str, rng: random.Random) -> tuple[str, int, str]:
    """One question, its integer answer, and a one-line worked solution."""
    if level == "add1":
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        return f"What is {a} + {b}?", a + b, f"{a} plus {b} equals {a + b}."
    if level == "add2":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return f"What is {a} + {b}?", a + b, f"{a} plus {b} equals {a + b}."
    if level == "mixed2":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        if rng.random() < 0.5:
            return f"What is {a} + {b}?", a + b, f"{a} plus {b} equals {a + b}."
        a, b = max(a, b), min(a, b)
        return f"What is {a} - {b}?", a - b, f"{a} minus {b} equals {a - b}."
    if level == "word2":
        name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
        start, got, gave = rng.randint(5, 30), rng.randint(2, 20), rng.randint(1, 9)
        question = (
            f"{name} has {start} {item}, gets {got} more, then gives away {gave}. How many {item} does {name} have now?"
        )
        answer = start + got - gave
        return question, answer, f"{start} plus {got} equals {start + got}. {start + got} minus {gave} equals {answer}."
    raise ValueError(f"Unknown arithmetic level {level!r}; choose one of {ARITHMETIC_LEVELS}.")


def arithmetic_problems(level: str = "add1", n_train: int = 200, n_test: int = 64, seed: int = 0) -> DatasetDict:
    """Arithmetic questions with exact integer answers, graded by ``level``.

    Levels: ``add1`` (one-digit addition), ``add2`` (two-digit addition), ``mixed2`` (two-digit
    addition and subtraction), ``word2`` (two-step word problems). Columns: ``question`` and
    ``answer`` (the integer as a string), and ``reasoning`` (a one-line worked solution, used for the
    supervised warm start of notebooks 02 and 04). Test questions never appear in the training split.
    """
    if level not in ARITHMETIC_LEVELS:
        raise ValueError(f"Unknown arithmetic level {level!r}; choose one of {ARITHMETIC_LEVELS}.")
    rng = random.Random(f"{seed}-{level}")
    seen: dict[str, tuple[int, str]] = {}
    attempts = 0
    while len(seen) < n_train + n_test:
        attempts += 1
        if attempts > 50 * (n_train + n_test):
            raise ValueError(
                f"Level {level!r} has only {len(seen)} distinct questions; ask for fewer than "
                f"n_train + n_test = {n_train + n_test}."
            )
        question, answer, reasoning = _problem(level, rng)
        seen.setdefault(question, (answer, reasoning))
    items = list(seen.items())
    test, train = items[:n_test], items[n_test:]
    as_rows = lambda pairs: [{"question": q, "answer": str(a), "reasoning": r} for q, (a, r) in pairs]  # noqa: E731
    return DatasetDict({"train": Dataset.from_list(as_rows(train)), "test": Dataset.from_list(as_rows(test))})


def format_solution(reasoning: str, answer: str | int) -> str:
    """A completion in the course's reasoning/answer format (what the format rewards pay for)."""
    return f"<reasoning>\n{reasoning}\n</reasoning>\n<answer>\n{answer}\n</answer>"


def worked_examples(dataset: Dataset, n: int, system_prompt: str | None = None) -> Dataset:
    """``n`` supervised prompt/completion pairs (conversational) for ``SFTTrainer``, from the first rows.

    ``dataset`` needs ``question``, ``answer`` and ``reasoning`` columns, as :func:`arithmetic_problems`
    returns. The completion is :func:`format_solution`: a warm start that shows the model the format.
    """
    missing = {"question", "answer", "reasoning"} - set(dataset.column_names)
    if missing:
        raise DatasetFormatError(
            f"worked_examples needs columns {sorted(missing)}; the dataset has {dataset.column_names}."
        )
    if not 1 <= n <= len(dataset):
        raise ValueError(f"n must be between 1 and the {len(dataset)} rows of the dataset, got {n}.")
    rows = []
    for row in dataset.select(range(n)):
        prompt = [{"role": "system", "content": system_prompt}] if system_prompt else []
        prompt.append({"role": "user", "content": row["question"]})
        completion = [{"role": "assistant", "content": format_solution(row["reasoning"], row["answer"])}]
        rows.append({"prompt": prompt, "completion": completion})
    return Dataset.from_list(rows)


def to_conversational(
    dataset: Dataset | DatasetDict,
    system_prompt: str | None = None,
    question_column: str = "question",
) -> Dataset | DatasetDict:
    """Add a ``prompt`` column of chat messages built from ``question_column``.

    The other columns (e.g. ``answer``) are kept: TRL passes them to reward functions as
    keyword arguments. The result is validated before it is returned.
    """
    if isinstance(dataset, DatasetDict):
        return DatasetDict({k: to_conversational(v, system_prompt, question_column) for k, v in dataset.items()})
    if question_column not in dataset.column_names:
        raise DatasetFormatError(
            f"Column {question_column!r} not found; the dataset has columns {dataset.column_names}. "
            f"Pass question_column=<the column holding the question text>."
        )
    for i, value in enumerate(dataset[question_column]):
        if not isinstance(value, str) or not value.strip():
            raise DatasetFormatError(
                f"Row {i}, column {question_column!r}: expected a non-empty string, got {value!r}. "
                "Drop or fix that row before converting."
            )

    def build(row: dict[str, Any]) -> dict[str, Any]:
        messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
        messages.append({"role": "user", "content": row[question_column]})
        return {"prompt": messages}

    converted = dataset.map(build)
    validate_prompt_dataset(converted)
    return converted


_ROLES = {"system", "user", "assistant", "tool"}


def validate_prompt_dataset(dataset: Dataset, required_columns: Iterable[str] = ()) -> None:
    """Check that ``dataset`` is ready for ``GRPOTrainer``; raise :class:`DatasetFormatError` if not.

    Accepts the standard format (``prompt`` is a string) and the conversational format
    (``prompt`` is a list of ``{"role": ..., "content": ...}`` messages ending with a user turn).
    ``required_columns`` are extra columns a reward function needs (e.g. ``"answer"``); they must
    exist and hold no empty values.
    """
    columns = dataset.column_names
    if "prompt" not in columns:
        raise DatasetFormatError(
            f"No 'prompt' column; the dataset has columns {columns}. GRPOTrainer reads prompts from a "
            "column named 'prompt' (rename yours with dataset.rename_column(old, 'prompt'), or build it "
            "with course_utils.data.to_conversational)."
        )
    if len(dataset) == 0:
        raise DatasetFormatError("The dataset has no rows.")
    for column in required_columns:
        if column not in columns:
            raise DatasetFormatError(
                f"Column {column!r} is required (a reward function reads it) but the dataset has only {columns}."
            )
        for i, value in enumerate(dataset[column]):
            if value is None or (isinstance(value, str) and not value.strip()):
                raise DatasetFormatError(f"Row {i}, column {column!r}: empty value {value!r}.")
    for i, prompt in enumerate(dataset["prompt"]):
        _validate_prompt(i, prompt)


def _validate_prompt(i: int, prompt: Any) -> None:
    where = f"Row {i}, column 'prompt'"
    example = "[{'role': 'user', 'content': 'What is 2 + 3?'}]"
    if isinstance(prompt, str):
        if not prompt.strip():
            raise DatasetFormatError(f"{where}: the prompt is an empty string.")
        return
    if not isinstance(prompt, list) or not prompt:
        raise DatasetFormatError(
            f"{where}: expected a string or a non-empty list of chat messages like {example}, "
            f"got {type(prompt).__name__}: {prompt!r:.80}."
        )
    for j, message in enumerate(prompt):
        if not isinstance(message, dict) or "role" not in message or "content" not in message:
            raise DatasetFormatError(
                f"{where}: message {j} must be a dict with 'role' and 'content' keys (like {example}), "
                f"got {message!r:.80}."
            )
        if message["role"] not in _ROLES:
            raise DatasetFormatError(f"{where}: message {j} has role {message['role']!r}; use one of {sorted(_ROLES)}.")
        content = message["content"]
        if not isinstance(content, str) or not content.strip():
            raise DatasetFormatError(f"{where}: message {j} ({message['role']}) has empty content {content!r}.")
    if prompt[-1]["role"] != "user":
        raise DatasetFormatError(
            f"{where}: the last message is from {prompt[-1]['role']!r}; a GRPO prompt must end with the "
            "user's turn so the model writes the assistant's reply."
        )
