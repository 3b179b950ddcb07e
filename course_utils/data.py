"""Deterministic prompt sets the course generates itself (no Hub datasets at run time).

Everything here is seeded: the same ``seed`` gives the same rows on every machine, and the
held-out ("test") split never shares a question with the training split.

* :func:`length_prompts`: open-ended questions for the length lesson (notebook 01). Train and
  test use disjoint topics, so "held-out" means topics the model never trained on.
* :func:`arithmetic_problems`: graded arithmetic with exact integer answers (later lessons), and
  :func:`worked_examples`: formatted solutions for a supervised warm start.
* :func:`to_conversational` and :func:`validate_prompt_dataset`: TRL's conversational format,
  checked row by row with errors that name the row and the column.
* :func:`load_rows`: your own CSV or JSON Lines file, every row tagged with its line in the file, and a
  one-line error naming the line and the fix for a file that cannot be read (encoding, separator, shape).
"""

from __future__ import annotations

import csv
import io
import json
import random
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from datasets import Dataset, DatasetDict

T = TypeVar("T")

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
#: For each topic, stems of words an answer about it tends to use, never the topic's own name. A word matches a
#: stem of four letters or more that it starts with ("pollin": "pollinate", "pollination"), and a shorter stem
#: only whole or plural ("sea", "seas"; not "season"). Notebook 07 judges its runs with these:
#: the reward it trains with checks only that the topic is named, so this measure of the goal is independent of it.
TOPIC_WORDS: dict[str, tuple[str, ...]] = {
    "the ocean": ("sea", "water", "wave", "tide", "salt", "fish", "marine", "deep", "coast", "whale", "coral", "earth"),
    "a volcano": ("lava", "erupt", "magma", "ash", "crater", "mountain", "molten", "hot", "rock", "fire"),
    "coffee": ("bean", "caffein", "brew", "cup", "drink", "espresso", "roast", "morning", "aroma", "bitter"),
    "the moon": ("earth", "orbit", "lunar", "night", "crater", "tide", "sky", "satellite", "phase", "light"),
    "bicycles": ("ride", "rider", "riding", "pedal", "wheel", "cycl", "bike", "chain", "transport", "travel"),
    "rain": ("water", "drop", "cloud", "storm", "wet", "weather", "umbrella", "fall", "sky", "plant"),
    "a library": ("book", "read", "shelf", "shelves", "knowledge", "borrow", "quiet", "study"),
    "chess": ("board", "piece", "king", "queen", "pawn", "strateg", "game", "move", "player", "checkmate"),
    "bread": ("flour", "bak", "dough", "yeast", "loaf", "wheat", "oven", "food", "slice", "eat"),
    "music": ("song", "sound", "melod", "rhythm", "instrument", "play", "listen", "sing", "note", "harmon"),
    "gravity": ("force", "mass", "fall", "pull", "earth", "newton", "orbit", "weight", "attract", "object"),
    "a forest": ("tree", "wood", "leaf", "leaves", "green", "wildlife", "animal", "plant", "nature", "oak"),
    "winter": ("cold", "snow", "ice", "freez", "season", "december", "frost", "chill", "warm", "holiday"),
    "the internet": ("online", "web", "connect", "network", "computer", "information", "digital", "global",
                     "communicat", "email"),
    "honey": ("bee", "sweet", "nectar", "hive", "flower", "golden", "sticky", "sugar", "natural"),
    "trains": ("rail", "track", "station", "locomotive", "passenger", "travel", "engine", "carriage", "transport",
               "journey"),
    "clouds": ("sky", "water", "rain", "white", "vapor", "vapour", "float", "weather", "droplet", "fluffy"),
    "a desert": ("sand", "dry", "hot", "cactus", "arid", "heat", "dune", "sahara", "rain", "barren"),
    "penguins": ("bird", "ice", "antarctic", "swim", "cold", "fish", "waddl", "flightless", "black", "colon"),
    "glass": ("transparent", "clear", "window", "sand", "fragile", "break", "shatter", "silica", "melt", "bottle"),
    "football": ("ball", "team", "goal", "player", "sport", "game", "kick", "match", "field", "score"),
    "a lighthouse": ("lamp", "ship", "coast", "sea", "beacon", "sailor", "tower", "shore", "guid", "night"),
    "electricity": ("power", "current", "energy", "electron", "charge", "wire", "volt", "circuit", "light",
                    "device"),
    "tea": ("leaf", "leaves", "drink", "cup", "brew", "herb", "hot", "green", "sip", "water"),
    "mountains": ("peak", "summit", "high", "climb", "rock", "snow", "tall", "range", "hik", "valley"),
    "a camera": ("photo", "picture", "lens", "image", "capture", "shutter", "film", "shot", "moment", "digital"),
    "dreams": ("sleep", "night", "mind", "imagin", "subconscious", "brain", "vivid", "wish", "rem"),
    "salt": ("flavo", "sodium", "sea", "season", "taste", "food", "crystal", "preserv", "mineral", "cook"),
    "bees": ("honey", "pollin", "flower", "hive", "insect", "buzz", "queen", "nectar", "colon", "sting"),
    "a river": ("water", "flow", "stream", "bank", "fish", "current", "sea", "valley", "bridge", "ocean"),
    "the sun": ("star", "light", "heat", "energy", "solar", "sky", "warm", "earth", "bright", "planet"),
    "paper": ("write", "writ", "tree", "wood", "print", "page", "sheet", "book", "pulp", "pencil"),
    "history": ("past", "event", "century", "ancient", "war", "civiliz", "civilis", "record", "era", "learn"),
    "an island": ("sea", "ocean", "water", "beach", "surround", "land", "coast", "tropical", "shore", "sand"),
    "a garden": ("plant", "flower", "grow", "soil", "vegetabl", "seed", "green", "tree", "bloom", "water"),
    "snow": ("cold", "winter", "white", "flake", "ice", "freez", "frost", "melt", "ski", "fall"),
    "robots": ("machine", "automat", "program", "task", "artificial", "ai", "technolog", "mechanic", "computer",
               "sensor"),
    "a castle": ("king", "queen", "wall", "tower", "medieval", "fort", "stone", "knight", "moat", "royal"),
    "maps": ("navigat", "direction", "location", "place", "route", "geograph", "world", "road", "explor", "find"),
    "fire": ("flame", "heat", "burn", "hot", "smoke", "warm", "light", "wood", "spark", "danger"),
    "rainbows": ("color", "colour", "light", "storm", "sky", "sun", "arc", "spectrum", "refract", "prism"),
    "cheese": ("milk", "dairy", "cheddar", "flavo", "taste", "food", "age", "cow", "goat", "eat"),
    "a bridge": ("river", "cross", "connect", "span", "road", "water", "build", "structur", "side", "steel"),
    "owls": ("bird", "night", "nocturnal", "hoot", "wise", "wisdom", "eye", "prey", "feather", "hunt"),
    "the wind": ("air", "blow", "breeze", "storm", "gust", "weather", "energy", "turbine", "move", "cool"),
    "a violin": ("string", "music", "bow", "instrument", "play", "sound", "melod", "orchestra", "note", "classical"),
    "sand": ("beach", "grain", "desert", "tiny", "particle", "rock", "dune", "sea", "glass", "castle"),
    "airplanes": ("fly", "flight", "flies", "jet", "sky", "travel", "pilot", "wing", "airport", "passenger"),
    "a museum": ("art", "exhibit", "history", "artifact", "artefact", "display", "collect", "culture", "visit",
                 "paint"),
    "chocolate": ("cocoa", "cacao", "sweet", "candy", "dessert", "sugar", "treat", "bean", "dark", "milk"),
    "whales": ("ocean", "sea", "mammal", "swim", "largest", "giant", "blue", "fin", "marine", "water"),
    "a clock": ("time", "hour", "minute", "second", "hand", "tick", "watch", "alarm", "wall", "dial"),
    "thunder": ("lightning", "storm", "loud", "rumbl", "sound", "sky", "boom", "rain", "cloud", "electric"),
    "a market": ("buy", "sell", "vendor", "stall", "goods", "trade", "food", "fresh", "shop", "price"),
    "kites": ("fly", "flies", "flying", "wind", "string", "sky", "air", "soar", "tail", "colo"),
    "the desert night": ("star", "sky", "cold", "sand", "dark", "moon", "quiet", "silen", "cool", "calm"),
    "a harbour": ("boat", "ship", "port", "sea", "dock", "water", "sail", "fish", "coast", "anchor"),
    "volcanic islands": ("lava", "erupt", "ocean", "sea", "magma", "crater", "hawaii", "rock", "form", "ash"),
    "butterflies": ("wing", "insect", "flower", "caterpillar", "color", "colour", "flutter", "nectar", "beauti",
                    "metamorph"),
    "a telescope": ("star", "lens", "sky", "astronom", "space", "planet", "observ", "distant", "galax", "see"),
}

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

    def rows(topic_list: Sequence[str], n: int, parameter: str) -> list[dict[str, Any]]:
        pairs = [(t, tpl) for t in topic_list for tpl in LENGTH_TEMPLATES]
        rng.shuffle(pairs)
        if n > len(pairs):
            raise ValueError(f"{parameter}={n}, but this split has only {len(pairs)} distinct prompts; "
                             f"pass {parameter} <= {len(pairs)} (a preset's n_eval sets n_test).")
        return [{"prompt": [*system, {"role": "user", "content": tpl.format(t=t)}], "topic": t} for t, tpl in pairs[:n]]

    return DatasetDict({"train": Dataset.from_list(rows(train_topics, n_train, "n_train")),
                        "test": Dataset.from_list(rows(test_topics, n_test, "n_test"))})  # fmt: skip


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


def distinct_draws(draw: Callable[[int], tuple[str, T]], n: int, what: str) -> list[tuple[str, T]]:
    """``n`` draws with distinct keys, in the order first drawn; a repeated key keeps its first value.

    ``draw(k)`` returns ``(key, value)``; ``k`` is how many distinct keys were drawn so far (to alternate
    kinds row by row). After 50 × ``n`` draws without ``n`` distinct keys, a ``ValueError`` says how many exist.

    >>> words = iter("abacb")
    >>> distinct_draws(lambda k: (next(words), k), 3, "Words")
    [('a', 0), ('b', 1), ('c', 2)]
    """
    seen: dict[str, T] = {}
    for _ in range(50 * n):
        if len(seen) >= n:
            break
        key, value = draw(len(seen))
        seen.setdefault(key, value)
    if len(seen) < n:
        raise ValueError(f"{what} has only {len(seen)} distinct questions; ask for fewer than n_train + n_test = {n}.")
    return list(seen.items())


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

    def draw(_: int) -> tuple[str, tuple[int, str]]:
        question, answer, reasoning = _problem(level, rng)
        return question, (answer, reasoning)

    items = distinct_draws(draw, n_train + n_test, f"Level {level!r}")
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


#: Column :func:`load_rows` adds: the line of the file where each row starts (1-based, header included).
LINE_COLUMN = "line"
_LOADERS = {".csv": ",", ".tsv": "\t", ".jsonl": "json", ".json": "json"}
_SEPARATORS = (",", ";", "\t", "|")


class DataFileError(DatasetFormatError):
    """A data file cannot be read as rows. The message names the file, the line and the fix."""


def load_rows(
    path: str | Path, sep: str | None = None, encoding: str = "utf-8", line_column: str = LINE_COLUMN
) -> Dataset:
    """Read a CSV (``.csv``, ``.tsv``) or JSON Lines (``.jsonl``, ``.json``) file into a ``Dataset``.

    Every row keeps all of the file's columns and gains ``line_column``: the line of the file where the row
    starts, so a report can name the line to fix even when blank lines or quoted multi-line fields make rows
    and lines differ. Values are read as text, in both formats: a label ``1`` is the string ``"1"``, and a
    missing or null value is ``None``. A file that cannot be read (not ``encoding``, a different separator
    than ``sep``, no rows, rows with more fields than the header, a line that is not JSON) raises
    :class:`DataFileError` naming the line and what to change. ``datasets.load_dataset("csv", ...)`` reads
    the same files but forgets the lines, and reports these problems from deep inside pandas.
    """
    path = Path(path)
    kind = _LOADERS.get(path.suffix.lower())
    if kind is None:
        raise DataFileError(f"{path.name}: the file name must end in .csv, .tsv, .jsonl or .json, got {path.suffix!r}.")
    if not path.is_file():
        raise DataFileError(f"{path}: no such file (relative paths start from {Path.cwd()}).")
    text = _decode(path, path.read_bytes(), encoding)
    if not text.strip():
        raise DataFileError(f"{path.name} is empty: it needs a header line and at least one row.")
    if kind == "json":
        columns, records, lines = _read_json(path, text)
    else:
        columns, records, lines = _read_csv(path, text, sep or kind)
    if line_column in columns:
        raise DataFileError(
            f"{path.name} already has a column {line_column!r}, the name load_rows gives each row's line in the "
            f"file: pass line_column=<another name>, or remove that column (dataset.remove_columns({line_column!r}))."
        )
    data = {c: [r.get(c) for r in records] for c in columns}
    data[line_column] = lines
    return Dataset.from_dict(data)


def require_labels(kept: Dataset, label_column: str, labels: Sequence[str], all_rows: Dataset | None = None) -> None:
    """At least two of ``labels`` among the ``kept`` rows (a classifier needs two), else :class:`DatasetFormatError`.

    The message names the column, the values the file holds (from ``all_rows``, the rows before validation)
    and what to change: ``labels``, or a mapping of the file's values to them.
    """
    present = sorted({value for value in kept[label_column] if value in labels}) if len(kept) else []
    if len(present) >= 2:
        return
    source = all_rows if all_rows is not None else kept
    found = Counter(source[label_column]).most_common(6) if len(source) else []
    holds = ", ".join(f"{value!r} ({count} rows)" for value, count in found) or "nothing"
    mapping = "{" + ", ".join(f"{value!r}: ..." for value, _ in found[:4]) + "}"
    raise DatasetFormatError(
        f"{len(kept)} valid row(s), with label(s) {present}: training needs rows of at least two of labels="
        f"{list(labels)}. Column {label_column!r} holds {holds}. Map those values to your labels after loading, "
        f"raw = raw.map(lambda row: {{{label_column!r}: {mapping}[row[{label_column!r}]]}}) with each ... one of "
        f"{list(labels)}, or set labels to the values the column uses."
    )


def _decode(path: Path, raw: bytes, encoding: str) -> str:
    """The file's text; a clear error for UTF-16 or Latin-1 bytes read as UTF-8."""
    if encoding.lower().replace("_", "-") in ("utf-8", "utf8"):
        if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or raw[:4000].count(b"\x00") > len(raw[:4000]) // 4:
            raise DataFileError(
                f"{path.name} is UTF-16, not UTF-8 (it starts with a UTF-16 byte-order mark, or every other byte is "
                "0): pass encoding='utf-16' to load_rows, or save the file as UTF-8 (spreadsheets: 'CSV UTF-8')."
            )
        encoding = "utf-8-sig"  # Excel's "CSV UTF-8" starts with a byte-order mark: read it as plain UTF-8
    try:
        return raw.decode(encoding)
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        start = raw.rfind(b"\n", 0, error.start) + 1
        guess = "cp1252" if any(0x80 <= b <= 0x9F for b in raw) else "latin-1"
        raise DataFileError(
            f"{path.name} line {line} is not valid {encoding.removesuffix('-sig')}: byte {raw[error.start]:#04x} in "
            f"{raw[start : error.start + 12]!r}. The file is probably {guess} (Windows/Excel): pass "
            f"encoding={guess!r} to load_rows, or save the file as UTF-8 (spreadsheets: 'CSV UTF-8')."
        ) from None
    except LookupError:
        raise DataFileError(
            f"encoding={encoding!r} is not an encoding Python knows: try 'utf-8' or 'latin-1'."
        ) from None


def _read_csv(path: Path, text: str, sep: str) -> tuple[list[str], list[dict[str, Any]], list[int]]:
    limit = csv.field_size_limit()
    csv.field_size_limit(sys.maxsize // 2)  # csv refuses fields over 128 KB; a long row is the budget check's job
    header: list[str] = []
    records, lines, too_many, previous = [], [], [], 0
    try:
        reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, strict=True)
        for fields in reader:
            start, previous = previous + 1, reader.line_num
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue  # a blank line
            if not header:
                header = [f.strip() for f in fields]
                _check_header(path, header, start, sep, fields)
            elif len(fields) > len(header):
                too_many.append(f"line {start} has {len(fields)} fields")
            else:
                records.append({c: (fields[i] if i < len(fields) else None) for i, c in enumerate(header)})
                lines.append(start)
    except csv.Error as error:
        raise DataFileError(
            f"{path.name} line {previous + 1}: {error} in the row that starts there. A field with quotes must be "
            'quoted as a whole, with each inner quote doubled: "she said ""great"" twice".'
        ) from None
    finally:
        csv.field_size_limit(limit)
    if too_many:
        shown = "; ".join(too_many[:5]) + (f"; and {len(too_many) - 5} more" if len(too_many) > 5 else "")
        raise DataFileError(
            f"{path.name}: the header has {len(header)} columns {header}, but {shown}. A field that contains the "
            f'separator {sep!r} must be in double quotes ("like, this"); a spreadsheet\'s CSV export does that.'
        )
    if not records:
        raise DataFileError(f"{path.name} has a header {header} but no rows: add rows below the header line.")
    return header, records, lines


def _check_header(path: Path, header: list[str], line: int, sep: str, fields: list[str]) -> None:
    if len(header) == 1:
        found = [s for s in _SEPARATORS if s != sep and s in fields[0]]
        if found:
            raise DataFileError(
                f"{path.name} line {line}: the header {fields[0]!r} is one column when split on {sep!r}; the file "
                f"looks separated by {found[0]!r}: pass sep={found[0]!r} to load_rows, or save it with {sep!r}."
            )
    for i, name in enumerate(header, 1):
        if not name:
            raise DataFileError(f"{path.name} line {line}: column {i} of the header has no name; name it or delete it.")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise DataFileError(f"{path.name} line {line}: the header names {repeated} more than once; rename one of each.")


def _read_json(path: Path, text: str) -> tuple[list[str], list[dict[str, Any]], list[int]]:
    decoder = json.JSONDecoder()
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    columns: dict[str, None] = {}
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):  # one JSON array of objects
        items, position = [], text.index("[") + 1
        while True:
            while position < len(text) and text[position] in " \t\r\n,":
                position += 1
            if position >= len(text) or text[position] == "]":
                break
            line = text.count("\n", 0, position) + 1
            try:
                value, position = decoder.raw_decode(text, position)
            except json.JSONDecodeError as error:
                raise DataFileError(f"{path.name} line {error.lineno} is not valid JSON: {error.msg}.") from None
            items.append((line, value))
    else:
        items = []
        for line, content in enumerate(text.splitlines(), 1):
            if not content.strip():
                continue
            try:
                items.append((line, json.loads(content)))
            except json.JSONDecodeError as error:
                raise DataFileError(
                    f"{path.name} line {line} is not valid JSON ({error.msg}, column {error.colno}): JSON Lines "
                    'holds one complete object per line, such as {"review": "...", "label": "positive"}.'
                ) from None
    for line, value in items:
        if not isinstance(value, dict):
            raise DataFileError(
                f"{path.name} line {line}: expected an object with one field per column, got {type(value).__name__} "
                f"{json.dumps(value)[:60]}."
            )
        columns.update(dict.fromkeys(value))
        records.append({k: v if v is None or isinstance(v, str) else json.dumps(v) for k, v in value.items()})
        lines.append(line)
    if not records:
        raise DataFileError(f"{path.name} has no rows: JSON Lines needs one object per line.")
    return list(columns), records, lines
