import pytest
from datasets import Dataset

from course_utils.data import (
    ARITHMETIC_LEVELS,
    DatasetFormatError,
    arithmetic_problems,
    length_prompts,
    to_conversational,
    validate_prompt_dataset,
    worked_examples,
)
from course_utils.rewards import correctness_reward, strict_format_reward


def test_length_prompts_are_seeded_and_held_out_by_topic():
    a, b = length_prompts(seed=3), length_prompts(seed=3)
    assert a["train"].to_list() == b["train"].to_list() and a["test"].to_list() == b["test"].to_list()
    assert length_prompts(seed=4)["train"].to_list() != a["train"].to_list()
    assert not set(a["train"]["topic"]) & set(a["test"]["topic"])
    validate_prompt_dataset(a["train"])
    validate_prompt_dataset(a["test"])


def test_length_prompts_can_open_with_a_system_prompt():
    data = length_prompts(n_train=5, n_test=5, system_prompt="Be brief.")
    assert all(row["prompt"][0] == {"role": "system", "content": "Be brief."} for row in data["test"])
    assert length_prompts(n_train=5, n_test=5)["test"][0]["prompt"][0]["role"] == "user"
    validate_prompt_dataset(data["train"])


def test_length_prompts_refuse_more_rows_than_exist():
    with pytest.raises(ValueError, match="only .* distinct"):
        length_prompts(n_test=10_000)


@pytest.mark.parametrize("level", ARITHMETIC_LEVELS)
def test_arithmetic_answers_are_exact_and_splits_disjoint(level):
    data = arithmetic_problems(level, n_train=50, n_test=20, seed=1)
    assert len(data["train"]) == 50 and len(data["test"]) == 20
    assert not set(data["train"]["question"]) & set(data["test"]["question"])
    for row in data["test"]:
        if level != "word2":
            expression = row["question"].removeprefix("What is ").removesuffix("?")
            assert int(row["answer"]) == eval(expression)  # noqa: S307 - our own generated arithmetic
        assert row["answer"].lstrip("-").isdigit()
    assert arithmetic_problems(level, 50, 20, seed=1)["test"].to_list() == data["test"].to_list()


def test_arithmetic_level_and_size_errors():
    with pytest.raises(ValueError, match="Unknown arithmetic level 'add3'"):
        arithmetic_problems("add3")
    with pytest.raises(ValueError, match="only 100 distinct questions"):
        arithmetic_problems("add1", n_train=200, n_test=10)


def test_to_conversational_keeps_answer_column_and_adds_system_prompt():
    data = to_conversational(arithmetic_problems("add1", 10, 5), system_prompt="Be brief.")
    row = data["train"][0]
    assert row["prompt"][0] == {"role": "system", "content": "Be brief."}
    assert row["prompt"][1] == {"role": "user", "content": row["question"]}
    assert "answer" in data["train"].column_names


def test_to_conversational_names_a_missing_question_column():
    with pytest.raises(DatasetFormatError, match="Column 'question' not found.*\\['text'\\].*question_column="):
        to_conversational(Dataset.from_list([{"text": "hi"}]))


def test_to_conversational_names_the_empty_row():
    ds = Dataset.from_list([{"question": "ok?"}, {"question": "  "}])
    with pytest.raises(DatasetFormatError, match="Row 1, column 'question'"):
        to_conversational(ds)


def user(text):
    return [{"role": "user", "content": text}]


@pytest.mark.parametrize(
    ("rows", "required", "message"),
    [
        ([{"text": "hi"}], (), "No 'prompt' column; the dataset has columns \\['text'\\]"),
        ([{"prompt": "a"}, {"prompt": ""}], (), "Row 1, column 'prompt': the prompt is an empty string"),
        ([{"prompt": user("a"), "answer": "1"}], ("answer", "solution"), "Column 'solution' is required"),
        ([{"prompt": user("a"), "answer": "1"}, {"prompt": user("b"), "answer": ""}], ("answer",),
         "Row 1, column 'answer': empty value"),
        ([{"prompt": user("a")}, {"prompt": [{"role": "user", "content": ""}]}], (),
         "Row 1, column 'prompt': message 0 \\(user\\) has empty content"),
        ([{"prompt": [{"role": "robot", "content": "x"}]}], (), "message 0 has role 'robot'"),
        ([{"prompt": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}], (),
         "last message is from 'assistant'"),
        ([{"prompt": []}], (), "Row 0, column 'prompt': expected a string or a non-empty list"),
    ],
)  # fmt: skip
def test_validation_errors_name_row_and_column(rows, required, message):
    with pytest.raises(DatasetFormatError, match=message):
        validate_prompt_dataset(Dataset.from_list(rows), required_columns=required)


def test_validation_rejects_message_without_content():
    ds = Dataset.from_dict({"prompt": [[{"role": "user"}]]})
    with pytest.raises(DatasetFormatError, match="Row 0, column 'prompt': message 0"):
        validate_prompt_dataset(ds)


def test_validation_rejects_empty_dataset():
    with pytest.raises(DatasetFormatError, match="no rows"):
        validate_prompt_dataset(Dataset.from_dict({"prompt": []}))


@pytest.mark.parametrize("level", ARITHMETIC_LEVELS)
def test_worked_examples_are_formatted_correct_solutions(level):
    data = arithmetic_problems(level, n_train=20, n_test=5, seed=2)
    examples = worked_examples(data["train"], n=12, system_prompt="Use tags.")
    assert len(examples) == 12 and examples.column_names == ["prompt", "completion"]
    completions = examples["completion"]
    assert strict_format_reward(completions) == [1.0] * 12
    assert correctness_reward(completions, answer=data["train"]["answer"][:12]) == [1.0] * 12
    assert examples[0]["prompt"] == [
        {"role": "system", "content": "Use tags."},
        {"role": "user", "content": data["train"][0]["question"]},
    ]


def test_worked_examples_name_missing_columns_and_bad_sizes():
    data = arithmetic_problems("add1", n_train=10, n_test=5)
    with pytest.raises(DatasetFormatError, match=r"needs columns \['reasoning'\]"):
        worked_examples(data["train"].remove_columns("reasoning"), n=2)
    with pytest.raises(ValueError, match="between 1 and the 10 rows"):
        worked_examples(data["train"], n=11)


def test_shipped_reviews_match_their_generator(tmp_path):
    """data/reviews.csv is exactly what data/make_reviews.py writes, malformed rows included."""
    import csv
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    data_dir = Path(__file__).resolve().parents[1] / "data"
    shutil.copy(data_dir / "make_reviews.py", tmp_path)
    subprocess.run([sys.executable, str(tmp_path / "make_reviews.py")], check=True, capture_output=True)
    assert (tmp_path / "reviews.csv").read_bytes() == (data_dir / "reviews.csv").read_bytes()
    rows = list(csv.DictReader((data_dir / "reviews.csv").open()))
    bad = [r for r in rows if not r["review"] or r["label"] not in ("positive", "negative")]
    assert len(rows) == 131 and len(bad) == 3


def test_load_rows_tags_each_row_with_the_line_it_starts_on(tmp_path):
    from course_utils.data import load_rows

    # line 1 header; line 2 blank; lines 3-4 one row whose quoted field spans two lines; line 5 a row
    (tmp_path / "t.csv").write_text('a,b\n\n"two\nlines",x\nthree,y\n')
    rows = load_rows(tmp_path / "t.csv")
    assert rows.to_list() == [{"a": "two\nlines", "b": "x", "line": 3}, {"a": "three", "b": "y", "line": 5}]


def test_load_rows_reads_every_value_as_text_in_both_formats(tmp_path):
    from course_utils.data import load_rows

    (tmp_path / "t.csv").write_text("text,label,score\nok,1,0.5\nshort,0\n")
    assert load_rows(tmp_path / "t.csv").to_list() == [
        {"text": "ok", "label": "1", "score": "0.5", "line": 2},
        {"text": "short", "label": "0", "score": None, "line": 3},  # a missing field is None, not ""
    ]
    (tmp_path / "t.jsonl").write_text('{"text": "ok", "label": 1, "tags": ["a"]}\n{"text": null, "label": true}\n')
    assert load_rows(tmp_path / "t.jsonl").to_list() == [
        {"text": "ok", "label": "1", "tags": '["a"]', "line": 1},
        {"text": None, "label": "true", "tags": None, "line": 2},
    ]


def test_load_rows_reads_other_separators_and_encodings_when_told(tmp_path):
    from course_utils.data import load_rows

    (tmp_path / "t.csv").write_bytes("text;label\nCafé, très bon;positive\n".encode("latin-1"))
    assert load_rows(tmp_path / "t.csv", sep=";", encoding="latin-1")["text"] == ["Café, très bon"]
    (tmp_path / "t.tsv").write_text("text\tlabel\nfine, thanks\tpositive\n", encoding="utf-16")
    assert load_rows(tmp_path / "t.tsv", encoding="utf-16")["text"] == ["fine, thanks"]
    with pytest.raises(DatasetFormatError, match="encoding='nope' is not an encoding Python knows"):
        load_rows(tmp_path / "t.csv", encoding="nope")


def test_load_rows_keeps_a_file_line_column_under_another_name(tmp_path):
    from course_utils.data import load_rows

    (tmp_path / "t.csv").write_text("text,line\nok,7\n")
    assert load_rows(tmp_path / "t.csv", line_column="file_line").to_list() == [
        {"text": "ok", "line": "7", "file_line": 2}
    ]


def test_load_rows_reads_a_field_longer_than_csvs_default_limit(tmp_path):
    import csv

    from course_utils.data import load_rows

    limit = csv.field_size_limit()
    (tmp_path / "t.csv").write_text("text,label\n" + "x" * 300_000 + ",positive\n")  # csv refuses > 131,072
    assert len(load_rows(tmp_path / "t.csv")[0]["text"]) == 300_000
    assert csv.field_size_limit() == limit, "the csv module's global limit is restored"


def test_require_labels_needs_two_labels_and_names_the_values_found():
    from course_utils.data import require_labels

    rows = Dataset.from_dict({"label": ["positive", "negative", "positive"]})
    require_labels(rows, "label", ["positive", "negative"])
    with pytest.raises(DatasetFormatError, match=r"label\(s\) \['positive'\].*holds 'positive' \(2 rows\)"):
        require_labels(rows.select([0, 2]), "label", ["positive", "negative"])
    numbers = Dataset.from_dict({"label": ["1", "0", "1"]})
    with pytest.raises(DatasetFormatError, match=r"holds '1' \(2 rows\), '0' \(1 rows\).*\{'1': \.\.\., '0': \.\.\.\}"):
        require_labels(numbers.select([]), "label", ["positive", "negative"], all_rows=numbers)
