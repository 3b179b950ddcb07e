"""Bad input for notebook 08: its own loading, validation and split cells, run on files a learner might bring.

Each probe writes a file, runs the notebook's cells on it (the cells' source, read from the .ipynb, in one
namespace, as Jupyter would), and expects either the right rows reported at their real file lines, or one
clear error from the course or the notebook that names the line, column or parameter and the fix: never an
exception from inside datasets or pandas, and never a silent wrong result.
"""

import csv
import io
import json
import os
import re
import traceback
from pathlib import Path

import nbformat
import pytest

os.environ.setdefault("MPLBACKEND", "Agg")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "08_your_own_data.ipynb"
REVIEWS = ROOT / "data" / "reviews.csv"
LOAD_TO_PROMPTS = ("08-07", "08-09", "08-11", "08-13")  # load, validate, split, prompts: no model needed
CHECK_KEY = '"validation accounted for every row": '
# data/make_reviews.py inserts its malformed rows at row indices 17, 42 and 88; the header is line 1 and row i
# is on line i + 2.
SHIPPED_BAD_LINES = [17 + 2, 42 + 2, 88 + 2]


def cell(cell_id: str) -> str:
    return next(c.source for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.get("id") == cell_id)


@pytest.fixture(scope="module")
def base():
    """The namespace after the parameters cell and the imports cell (no model is loaded there)."""
    namespace: dict = {}
    for cell_id in ("08-04", "08-05"):
        exec(compile(cell(cell_id), f"<cell {cell_id}>", "exec"), namespace)
    return namespace


def run(base, data_file, cells=LOAD_TO_PROMPTS, sources=None, **parameters):
    namespace = dict(base, data_file=str(data_file), **parameters)
    for cell_id in cells:
        source = (sources or {}).get(cell_id, cell(cell_id))
        exec(compile(source, f"<cell {cell_id}>", "exec"), namespace)
    return namespace


def validation_check(namespace) -> bool:
    """The expression of notebook 08's guard "validation accounted for every row", evaluated."""
    lines = cell("08-25").splitlines()
    namespace = dict(namespace)
    exec(next(line for line in lines if line.startswith("rows_valid = ")), namespace)  # noqa: S102 - the notebook's own code
    line = next(line for line in lines if line.strip().startswith(CHECK_KEY))
    return eval(line.strip().removeprefix(CHECK_KEY).rstrip(","), namespace)  # noqa: S307 - the notebook's own code


def shipped_rows() -> list[list[str]]:
    return list(csv.reader(io.StringIO(REVIEWS.read_text(), newline="")))


def write_csv(path: Path, rows, **fmt) -> Path:
    with path.open("w", newline="", encoding=fmt.pop("encoding", "utf-8")) as f:
        csv.writer(f, **fmt).writerows(rows)
    return path


# ---- files that load, with the malformed rows reported at their real lines ---------------------------------


def shipped(tmp):
    return REVIEWS, SHIPPED_BAD_LINES


def blank_lines(tmp):
    lines = REVIEWS.read_text().splitlines(keepends=True)
    # a blank line after the header (line 2), and two after the ninth row: rows from line 3 on move by 1, rows
    # from the old line 11 on move by 3
    text = lines[0] + "\n" + "".join(lines[1:10]) + "\n \n" + "".join(lines[10:])
    (tmp / "blank.csv").write_text(text)
    return tmp / "blank.csv", [19 + 3, 44 + 3, 90 + 3]


def multiline_field(tmp):
    lines = REVIEWS.read_text().splitlines(keepends=True)
    text = lines[0] + '"Good kettle.\nIt boils fast.\nRecommended.",positive,kettle\n' + "".join(lines[1:])
    (tmp / "multi.csv").write_text(text)
    return tmp / "multi.csv", [19 + 3, 44 + 3, 90 + 3]  # the new row takes lines 2-4


def crlf_and_bom(tmp):
    (tmp / "excel.csv").write_bytes(
        b"\xef\xbb\xbf" + REVIEWS.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    )
    return tmp / "excel.csv", SHIPPED_BAD_LINES  # Excel's "CSV UTF-8": byte-order mark and CRLF


def latin1_read_with_its_encoding(tmp):
    rows = shipped_rows()
    rows[1][0] = "Café-quality " + rows[1][0]
    write_csv(tmp / "latin1.csv", rows, encoding="latin-1")
    return tmp / "latin1.csv", SHIPPED_BAD_LINES


def short_row(tmp):
    rows = shipped_rows()
    rows[5] = rows[5][:2]  # line 6 lost its product field
    write_csv(tmp / "short.csv", rows)
    return tmp / "short.csv", sorted([*SHIPPED_BAD_LINES, 6])


def jsonl_with_blank_line(tmp):
    rows = [dict(zip(shipped_rows()[0], r, strict=True)) for r in shipped_rows()[1:]]
    lines = [json.dumps(r) for r in rows]
    lines.insert(0, "")  # a blank first line: row i is now on line i + 2
    (tmp / "reviews.jsonl").write_text("\n".join(lines) + "\n")
    return tmp / "reviews.jsonl", [17 + 2, 42 + 2, 88 + 2]


def json_array(tmp):
    rows = [dict(zip(shipped_rows()[0], r, strict=True)) for r in shipped_rows()[1:]]
    (tmp / "reviews.json").write_text("[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    return tmp / "reviews.json", [17 + 2, 42 + 2, 88 + 2]  # "[" is line 1


def numeric_label_in_json(tmp):
    rows = [dict(zip(shipped_rows()[0], r, strict=True)) for r in shipped_rows()[1:]]
    rows[3]["label"] = 1  # a number, not text: reported as '1', not one of the labels (row 3 is on line 4)
    (tmp / "mixed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp / "mixed.jsonl", sorted([17 + 1, 42 + 1, 88 + 1, 3 + 1])


LOADS = [shipped, blank_lines, multiline_field, crlf_and_bom, short_row, jsonl_with_blank_line, json_array,
         numeric_label_in_json]  # fmt: skip


@pytest.mark.parametrize("make", LOADS, ids=[f.__name__ for f in LOADS])
def test_malformed_rows_are_reported_at_their_real_file_lines(base, tmp_path, make, capsys):
    data_file, expected_lines = make(tmp_path)
    namespace = run(base, data_file)
    assert [line for line, _ in namespace["report"]] == expected_lines
    printed = capsys.readouterr().out
    assert all(f"{Path(data_file).name} line {line}:" in printed for line in expected_lines)
    assert len(namespace["clean"]) == len(namespace["raw"]) - len(expected_lines)
    assert validation_check(namespace), "the final check must hold for any file whose rows were all accounted for"


def test_a_latin1_file_loads_with_the_encoding_the_error_names(base, tmp_path):
    data_file, expected = latin1_read_with_its_encoding(tmp_path)
    with pytest.raises(ValueError, match="encoding='latin-1'"):
        run(base, data_file, cells=("08-07",))
    source = cell("08-07").replace("load_rows(path)", "load_rows(path, encoding='latin-1')")
    namespace = run(base, data_file, sources={"08-07": source})
    assert [line for line, _ in namespace["report"]] == expected
    assert namespace["raw"][0]["review"].startswith("Café-quality")


# ---- files and parameters that cannot work: one clear error, from the course or the notebook --------------


def _rows_with(label=None, product=None, n=None):
    rows = shipped_rows()
    body = [r for r in rows[1:] if r[1] in ("positive", "negative") and r[0]][:n]
    if label:
        body = [[r[0], label(r[1]), r[2]] for r in body]
    if product:
        body = [[r[0], r[1], product(r[2])] for r in body]
    return [rows[0], *body]


def _csv(name, rows, **fmt):
    return lambda tmp: write_csv(tmp / name, rows, **fmt)


def _text(name, text):
    def make(tmp):
        (tmp / name).write_text(text)
        return tmp / name

    return make


def _bytes(name, data):
    def make(tmp):
        (tmp / name).write_bytes(data)
        return tmp / name

    return make


_header = "review,label,product\n"
_three_products = ("kettle", "tent", "lamp")
ERRORS = {
    "labels 1/0": (
        _csv("numeric.csv", _rows_with(label=lambda v: "1" if v == "positive" else "0")),
        {},
        r"0 valid row\(s\).*Column 'label' holds '[01]' \(\d+ rows\), '[01]' \(\d+ rows\).*raw = raw\.map\(lambda row",
    ),
    "labels Positive/Negative": (
        _csv("capital.csv", _rows_with(label=str.capitalize)),
        {},
        r"Column 'label' holds 'Positive'.*'Negative'",
    ),
    "labels parameter 1/0": (_csv("numeric2.csv", _rows_with()), {"labels": ["1", "0"]}, "each one lower-case word"),
    "labels parameter capitalised": (
        _csv("cap2.csv", _rows_with()),
        {"labels": ["Positive", "Negative"]},
        "each one lower-case word",
    ),
    "one label parameter": (_csv("one.csv", _rows_with()), {"labels": ["positive"]}, "two or more labels"),
    "only one label in the file": (
        _csv("pos.csv", _rows_with(label=lambda v: "positive")),
        {},
        r"label\(s\) \['positive'\]: training needs",
    ),
    "every label empty": (
        _csv("nolabel.csv", _rows_with(label=lambda v: "")),
        {},
        r"0 valid row\(s\).*'' \(\d+ rows\)",
    ),
    "header only": (_text("header.csv", _header), {}, r"has a header \['review', 'label', 'product'\] but no rows"),
    "header and blank lines": (_text("blanks.csv", _header + "\n\n  \n"), {}, "but no rows"),
    "empty file": (_text("empty.csv", ""), {}, "empty.csv is empty"),
    "too few product groups": (
        _csv("three.csv", _rows_with(product=lambda p: _three_products[sum(map(ord, p)) % 3])),
        {},
        r"n_test_groups=4, but the kept rows have 3 'product' value\(s\): set n_test_groups between 1 and 2",
    ),
    "one product group": (
        _csv("single.csv", _rows_with(product=lambda p: "kettle")),
        {},
        "set group_column to a column with two or more",
    ),
    "n_test_groups 0": (_csv("zero.csv", _rows_with()), {"n_test_groups": 0}, "set n_test_groups between 1 and 15"),
    "latin-1 file": (
        _bytes("latin1.csv", (_header + "Café au lait maker,positive,kettle\n").encode("latin-1")),
        {},
        r"latin1.csv line 2 is not valid utf-8: byte 0xe9.*encoding='latin-1'",
    ),
    "cp1252 file": (
        _bytes("cp1252.csv", (_header + "The “best” kettle,positive,kettle\n").encode("cp1252")),
        {},
        "line 2 is not valid utf-8.*encoding='cp1252'",
    ),
    "UTF-16 file": (_bytes("utf16.csv", REVIEWS.read_text().encode("utf-16")), {}, "is UTF-16.*encoding='utf-16'"),
    "UTF-16 without byte-order mark": (
        _bytes("utf16le.csv", REVIEWS.read_text().encode("utf-16-le")),
        {},
        "is UTF-16",
    ),
    "semicolon separator": (
        _csv("semi.csv", shipped_rows(), delimiter=";"),
        {},
        "looks separated by ';': pass sep=';'",
    ),
    "tab separator": (_csv("tab.csv", shipped_rows(), delimiter="\t"), {}, r"looks separated by '\\t'"),
    "unquoted comma": (
        _text("comma.csv", _header + "Great, sturdy kettle,positive,kettle\nFine,positive,tent\n"),
        {},
        r"the header has 3 columns .* but line 2 has 4 fields.*double quotes",
    ),
    "unterminated quote": (
        _text("quote.csv", _header + 'Fine,positive,tent\n"Great kettle,positive,kettle\nOk,negative,lamp\n'),
        {},
        "quote.csv line 3: unexpected end of data",
    ),
    "stray quote after a quoted field": (
        _text("quote2.csv", _header + '"Great" kettle,positive,kettle\n'),
        {},
        "line 2: ',' expected after",
    ),
    "missing column": (
        _text("cols.csv", "text,label,product\nGood,positive,tent\n"),
        {},
        r"has no column\(s\) \['review'\]",
    ),
    "wrong file type": (_text("reviews.txt", "whatever"), {}, "must end in .csv, .tsv, .jsonl or .json"),
    "missing file": (lambda tmp: tmp / "nowhere.csv", {}, "nowhere.csv: no such file"),
    "JSONL line that is not JSON": (
        _text("bad.jsonl", '{"review": "Good", "label": "positive", "product": "tent"}\n\n{"review": "Bad"\n'),
        {},
        "bad.jsonl line 3 is not valid JSON",
    ),
    "JSONL line that is a list": (
        _text("list.jsonl", '["Good", "positive", "tent"]\n'),
        {},
        "line 1: expected an object",
    ),
    "JSON array with a syntax error": (
        _text("broken.json", '[\n{"review": "a", "label": "positive", "product": "x"},\n{"review": }\n]'),
        {},
        "broken.json line 3 is not valid JSON",
    ),
    "file that already has a line column": (
        _text("lined.csv", "review,label,product,line\nGood,positive,tent,7\n"),
        {},
        "already has a column 'line'.*line_column=",
    ),
    "header names a column twice": (_text("twice.csv", "review,label,label\nGood,positive,x\n"), {}, "more than once"),
    "header with an empty name": (_text("noname.csv", "review,,product\nGood,positive,x\n"), {}, "column 2 .* no name"),
}


def _no_deep_trace(error: BaseException) -> None:
    """Raised by the course or the notebook, with no chained exception from a library shown above it."""
    last = traceback.extract_tb(error.__traceback__)[-1].filename
    assert "course_utils" in last or last.startswith("<cell"), f"raised from inside {last}"
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)


@pytest.mark.parametrize("case", list(ERRORS))
def test_bad_files_and_parameters_get_one_clear_error(base, tmp_path, case):
    make, parameters, message = ERRORS[case]
    with pytest.raises(ValueError) as caught:  # DataFileError and DatasetFormatError are ValueErrors too
        run(base, make(tmp_path), **parameters)
    assert re.search(message, str(caught.value), re.DOTALL), str(caught.value)
    assert len(str(caught.value)) < 600, "one line, not a dump"
    _no_deep_trace(caught.value)


class _Tokenizer:
    """One token per word; the chat template joins the messages (enough for the budget cell)."""

    model_max_length = 10**30  # "no limit", like the course tokenizer

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=True):
        return " ".join(m["content"] for m in messages) + " <assistant>"

    def __call__(self, text, add_special_tokens=True):
        return {"input_ids": list(range(len(text.split())))}


class _Model:
    class config:  # noqa: N801
        max_position_embeddings = 2048


def test_a_10_mb_review_is_named_by_its_line_and_the_limit(base, tmp_path):
    rows = shipped_rows()
    rows[5][0] = "word " * 2_000_000  # 10 MB, 2,000,000 words on line 6
    data_file = write_csv(tmp_path / "huge.csv", rows)
    base = dict(base, load_model=lambda *args, **kwargs: (_Model(), _Tokenizer()))
    with pytest.raises(ValueError) as caught:
        run(base, data_file, cells=(*LOAD_TO_PROMPTS, "08-15"))
    # the prompt is the system prompt (15 words), the review and "<assistant>": over 2,000,000 tokens
    assert re.search(
        r"Row \d+ \(line 6 of the file\): the prompt has 20000\d\d tokens.*context of 2048 tokens.*more than 2040",
        str(caught.value),
    ), str(caught.value)
    _no_deep_trace(caught.value)


def test_the_budget_cell_refuses_a_budget_that_cannot_hold_a_label(base):
    base = dict(base, load_model=lambda *args, **kwargs: (_Model(), _Tokenizer()))
    namespace = run(base, REVIEWS, cells=(*LOAD_TO_PROMPTS, "08-15"))  # the shipped file fits
    assert namespace["answer_tokens"] == {"positive": 2, "negative": 2}  # one word + end-of-sequence
    with pytest.raises(ValueError, match="max_completion_length=1 tokens cannot hold every label.*at least 2"):
        run(base, REVIEWS, cells=(*LOAD_TO_PROMPTS, "08-15"), max_completion_length=1)


# ---- the final check holds for any file, and fails when validation misses a malformed row -----------------


def test_the_validation_check_holds_for_a_clean_jsonl_file_without_malformed_rows(base, tmp_path):
    namespace = run(base, REVIEWS)
    cleaned = tmp_path / "reviews.jsonl"
    namespace["clean"].remove_columns("line").to_json(str(cleaned))  # notebook 08's exercise 1
    again = run(base, cleaned)
    assert again["report"] == [] and len(again["clean"]) == 131 - 3
    assert validation_check(again)


def test_the_validation_check_fails_when_a_malformed_row_is_kept(base):
    lenient = cell("08-09").replace("if label not in labels:", "if label is None:")  # forgets unknown labels
    namespace = run(base, REVIEWS, sources={"08-09": lenient})
    assert [line for line, _ in namespace["report"]] == [19]  # 'neutral' (line 44) and '' (line 90) slipped through
    assert not validation_check(namespace)


def test_the_validation_check_fails_when_a_row_disappears_unreported(base):
    namespace = run(base, REVIEWS)
    namespace["clean"] = namespace["clean"].select(range(len(namespace["clean"]) - 1))  # a row lost, not reported
    assert not validation_check(namespace)


# ---- saving: a new folder per run, never over an earlier run ------------------------------------------------


class _Trainer:
    def save_model(self, directory):
        Path(directory).mkdir(parents=True)  # like save_pretrained, into the folder it is given
        (Path(directory) / "model.safetensors").write_text(f"weights of run {directory}")


class _Config:
    def to_dict(self):
        return {"learning_rate": 5e-5, "max_steps": 16, "seed": 0}


def test_saving_twice_keeps_the_first_run_and_says_where_each_is(base, tmp_path, capsys):
    from course_utils.evaluation import Estimate

    namespace = run(base, REVIEWS)
    acc = Estimate(0.9, 0.8, 0.95, 32)
    namespace.update(
        trainer=_Trainer(), config=_Config(), output_dir=tmp_path / "cpu", train_seconds=1.0, majority_acc=acc,
        base_acc=acc, after_acc=acc, sampled_acc=acc,
    )  # fmt: skip
    exec(compile(cell("08-23"), "<cell 08-23>", "exec"), namespace)
    first, first_record = namespace["run_dir"], namespace["record_path"].read_text()
    exec(compile(cell("08-23"), "<cell 08-23>", "exec"), namespace)
    second = namespace["run_dir"]
    assert first != second and first.parent == second.parent == tmp_path / "cpu"
    assert (first / "model" / "reproducibility.json").read_text() == first_record
    assert (first / "model" / "model.safetensors").read_text() == f"weights of run {first / 'model'}"
    assert json.loads(first_record)["data"]["dropped_lines"] == SHIPPED_BAD_LINES
    printed = capsys.readouterr().out
    assert f"this run is saved in {first}" in printed and f"this run is saved in {second}" in printed
