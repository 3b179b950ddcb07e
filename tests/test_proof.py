"""make prove / make seeds (scripts/prove.py): verdicts, content hashes, and docs/PROOF.md kept in sync."""

import json
import os
from pathlib import Path

import pytest
from repo_modules import load

ROOT = Path(__file__).resolve().parents[1]


def _prove():
    return load("scripts/prove.py")


def _row(kind, checks, passed, code, seed=None, guards=None):
    return {"kind": kind, "notebook": "01_demo", "code": code, "commit": "abc", "date": "2026-11-23 10:00",
            "preset": "cpu-ci", "parameters": {"seed": seed} if seed is not None else {}, "passed": passed,
            "recorded": True, "checks": checks, "guards": guards or {}, "metrics": {}, "minutes": 1.0,
            "error": None}  # fmt: skip


def _notebook(tmp_path, code="x = 1"):
    path = tmp_path / "01_demo.ipynb"
    path.write_text(json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["# t"]},
        {"cell_type": "code", "source": ["# Colab set-up"]},
        {"cell_type": "code", "source": ["seed = 0"], "metadata": {"tags": ["parameters"]}},
        {"cell_type": "code", "source": [code]},
    ]}))  # fmt: skip
    return path


def test_a_learning_check_that_passes_without_learning_is_a_defect():
    prove = _prove()
    on = _row("prove-on", {"gain": True, "level": True}, True, "h")
    assert prove.prove_verdict(on, _row("prove-off", {"gain": False, "level": False}, False, "h"))[2] == "proved"
    off = _row("prove-off", {"gain": False, "level": True}, False, "h")  # "level" holds without learning
    on_text, off_text, verdict = prove.prove_verdict(on, off)
    assert verdict.startswith("DEFECT") and off_text == "1/2: level" and on_text == "2/2"
    assert prove.prove_verdict(on, _row("prove-off", {}, False, "h"))[2] == "DEFECT: no learning checks"
    failed_as_written = _row("prove-on", {"gain": False}, False, "h")
    assert prove.prove_verdict(failed_as_written, _row("prove-off", {"gain": False}, False, "h"))[2].startswith(
        "not proved")
    assert prove.prove_verdict(None, None)[2] == "not run for this version"
    assert prove.prove_verdict(None, off)[2] == "not proved: the as-written run is missing"
    assert prove.prove_verdict(on, None) == ("2/2", "not run", "not proved: the learning-off run is missing")


def test_rows_count_only_for_the_code_they_ran_on(tmp_path):
    prove = _prove()
    nb = _notebook(tmp_path)
    old = prove.code_hash(nb)
    markdown_only = json.loads(nb.read_text())
    markdown_only["cells"][0]["source"] = ["# a new title"]
    nb.write_text(json.dumps(markdown_only))
    assert prove.code_hash(nb) == old, "markdown edits do not change what runs"
    markdown_only["cells"][1]["source"] = ["# a new Colab set-up, above the parameters"]
    nb.write_text(json.dumps(markdown_only))
    assert prove.code_hash(nb) == old, "the Colab set-up cell does nothing outside Colab"
    markdown_only["cells"][3]["source"] = ["# a comment that says why\n", "\n", "x  =  1  # trailing\n"]
    nb.write_text(json.dumps(markdown_only))
    assert prove.code_hash(nb) == old, "comments, blank lines and spacing do not change what runs"
    markdown_only["cells"][3]["source"] = ["x = 1; print('# not a comment')"]
    nb.write_text(json.dumps(markdown_only))
    assert prove.code_hash(nb) != old, "a '#' inside a string is code"
    markdown_only["cells"][3]["source"] = ["x = 1"]
    nb.write_text(json.dumps(markdown_only))
    rows = [_row("seed", {"gain": True}, True, old, seed=101)]
    assert len(prove.current(rows, [nb])["01_demo"]) == 1
    nb.write_text(nb.read_text().replace("x = 1", "x = 2"))
    assert prove.current(rows, [nb])["01_demo"] == [], "a row for other code does not count"
    assert "No seed runs" in prove.render(rows, [nb])


def test_seed_table_names_failing_and_passing_seeds_and_the_exit_status_follows_it(tmp_path):
    prove = _prove()
    nb = _notebook(tmp_path)
    code = prove.code_hash(nb)
    rows = [_row("seed", {"g": True}, True, code, seed=101), _row("seed", {"g": False}, False, code, seed=202)]
    table = prove.render(rows, [nb])
    assert "| 01_demo | 1/2 | 202 | 101 | 1.0 |" in table  # passed of those run, failing, passing, minutes
    assert not prove.all_good(rows, [nb], "seeds")
    rows.append(_row("seed", {"g": True}, True, code, seed=202))  # the latest run of a seed counts
    assert prove.all_good(rows, [nb], "seeds")


def test_seed_table_counts_passes_among_the_seeds_each_notebook_ran(tmp_path):
    """Each notebook counts only the seeds it ran: 1 of its 1 seed run passed, whatever the other ran."""
    prove = _prove()
    first = _notebook(tmp_path)
    second = tmp_path / "02_demo.ipynb"
    second.write_text(first.read_text())
    rows = [_row("seed", {"g": True}, True, prove.code_hash(first), seed=101),
            _row("seed", {"g": True}, True, prove.code_hash(second), seed=404)]
    rows[1]["notebook"] = "02_demo"
    table = prove.render(rows, [first, second])
    assert "| 01_demo | 1/1 | none | 101 | 1.0 |" in table
    assert "| 02_demo | 1/1 | none | 404 | 1.0 |" in table
    assert "| 02_demo | not run | | | |" in prove.render(rows[:1], [first, second])


def test_docs_tables_are_the_rendered_record():
    prove = _prove()
    doc = (ROOT / "docs" / "PROOF.md").read_text()
    rendered = prove.render(prove.load(), prove.course_notebooks())
    assert f"{prove.START}\n{rendered}\n{prove.END}" in doc, (
        "docs/PROOF.md differs from benchmarks/results/proof.jsonl for the current notebooks: "
        "run `python scripts/prove.py render`"
    )


def test_the_make_targets_command_lines_parse(tmp_path):
    """What make prove / make seeds run, with and without NOTEBOOKS and PRESET (argparse used to refuse
    notebooks after --preset, and took them as seeds after --seeds)."""
    prove, nb = _prove(), "notebooks/04_multi_stage_training.ipynb"
    args = prove.parse(["prove", nb, "--preset", "cpu-ci"])
    assert (args.mode, args.notebooks, args.preset) == ("prove", [Path(nb)], "cpu-ci")
    args = prove.parse(["seeds", nb, "--seeds", "101", "202"])
    assert (args.notebooks, args.seeds, args.preset) == ([Path(nb)], [101, 202], "cpu-ci")
    assert prove.parse(["seeds", "--seeds", "7"]).notebooks == []
    assert prove.parse(["prove", "--preset", "cpu", nb]).notebooks == [Path(nb)]


def test_a_relative_run_folder_still_finds_the_notebooks_record(tmp_path, monkeypatch):
    """`scripts/prove.py prove NB --out runs/x`: the kernel runs in notebooks/, so a relative results folder must
    be resolved before it starts (it once landed in notebooks/runs/x and every run read "no results recorded")."""
    import papermill

    runner = load("scripts/notebook_runner.py")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    path = _notebook(notebooks)

    def kernel(_input, _output, parameters, cwd, **_kwargs):  # what record_results does, from the kernel's folder
        results = Path(cwd) / os.environ[runner.RESULTS_ENV]
        results.mkdir(parents=True)
        (results / "01_demo.json").write_text(json.dumps({"passed": True, "checks": {"learned": True}}))

    monkeypatch.setattr(papermill, "execute_notebook", kernel)
    monkeypatch.chdir(tmp_path)
    run = runner.execute_notebook(path, Path("runs/x"), {"seed": 1})
    assert run.record == {"passed": True, "checks": {"learned": True}}, run.status
    assert (tmp_path / "runs/x/results/01_demo.json").is_file()


def test_the_test_runs_send_new_run_folders_elsewhere_and_make_course_does_not(tmp_path, monkeypatch):
    """08 and 12 save a 517 MB model in a new folder per run: the CI-mode runs (make test, prove, seeds) must not
    leave those in notebooks/outputs/, while a learner's `make course` keeps them there."""
    import papermill

    from course_utils.outputs import OUTPUTS_ENV

    runner = load("scripts/notebook_runner.py")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    path = _notebook(notebooks)
    seen = []
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **kw: seen.append(os.environ.get(OUTPUTS_ENV)))
    monkeypatch.delenv(OUTPUTS_ENV, raising=False)
    runner.execute_notebook(path, tmp_path / "runs/a", {}, run_folders=tmp_path / "folders")
    runner.execute_notebook(path, tmp_path / "runs/b", {})
    assert seen == [str((tmp_path / "folders").resolve()), None]
    assert OUTPUTS_ENV not in os.environ, "the runner puts the environment back as it was"


def test_a_run_never_writes_into_an_earlier_runs_folder(tmp_path):
    """make course and make prove write executed notebooks and summary.md: never over an earlier run's."""
    runner = load("scripts/notebook_runner.py")
    default = tmp_path / "runs" / "20261130-171500"
    first = runner.new_record_folder(None, default)
    (first / "summary.md").write_text("the earlier run")
    second = runner.new_record_folder(None, default)  # started in the same second
    assert (first, second) == (default, tmp_path / "runs" / "20261130-171500-2")
    with pytest.raises(SystemExit, match=r"--out .*20261130-171500 already holds an earlier run's files"):
        runner.new_record_folder(first, default)
    assert (first / "summary.md").read_text() == "the earlier run"
    assert runner.new_record_folder(tmp_path / "mine", default) == tmp_path / "mine", "a new --out is created"
    assert runner.new_record_folder(tmp_path / "mine", default) == tmp_path / "mine", "and an empty one is fine"


def test_two_runs_side_by_side_both_reach_the_tables(tmp_path, monkeypatch):
    """Two `make seeds` lanes at once: each appends to the record, and the one that ends last once rewrote
    docs/PROOF.md from the rows it had read at its start, so the other lane's runs showed "not run"."""
    prove = _prove()
    first, second = _notebook(tmp_path), tmp_path / "02_demo.ipynb"
    second.write_text(first.read_text())
    record, doc = tmp_path / "proof.jsonl", tmp_path / "PROOF.md"
    doc.write_text(f"# Proof\n{prove.START}\n{prove.END}\n")
    beside = _row("seed", {"g": True}, True, prove.code_hash(second), seed=404) | {"notebook": "02_demo"}

    def run_notebook(path, out, parameters, run_folders=None):  # the other lane finishes its run meanwhile
        with record.open("a") as f:
            f.write(json.dumps(beside) + "\n")
        return prove.NotebookRun(path.stem, out, 60.0, record={"passed": True, "checks": {"g": True}},
                                 parameters=parameters)  # fmt: skip

    monkeypatch.setattr(prove, "execute_notebook", run_notebook)
    monkeypatch.setattr(prove, "course_notebooks", lambda: [first, second])
    monkeypatch.setattr(prove, "RECORD", record)
    monkeypatch.setattr(prove, "DOC", doc)
    monkeypatch.setattr(prove, "REPO_ROOT", tmp_path)
    assert prove.main(["seeds", str(first), "--seeds", "404", "--out", str(tmp_path / "runs")]) == 0
    assert "| 01_demo | 1/1 | none | 404 | 1.0 |" in doc.read_text(), "this lane's run"
    assert "| 02_demo | 1/1 | none | 404 | 1.0 |" in doc.read_text(), "and the run the other lane appended"


def test_a_run_is_recorded_under_the_code_it_ran_not_the_code_after_it(tmp_path, monkeypatch):
    """A notebook edited while its seed run executes: the row carries the hash read before the run started, so
    the table does not credit the edited notebook with a run of the old code (seen 2026-12-05)."""
    prove = _prove()
    notebook = _notebook(tmp_path)
    before = prove.code_hash(notebook)
    record, doc = tmp_path / "proof.jsonl", tmp_path / "PROOF.md"
    doc.write_text(f"# Proof\n{prove.START}\n{prove.END}\n")

    def run_notebook(path, out, parameters, run_folders=None):
        _notebook(tmp_path, code="x = 2")  # the edit lands while the run executes
        return prove.NotebookRun(path.stem, out, 60.0, record={"passed": True, "checks": {"g": True}},
                                 parameters=parameters)  # fmt: skip

    monkeypatch.setattr(prove, "execute_notebook", run_notebook)
    monkeypatch.setattr(prove, "course_notebooks", lambda: [notebook])
    monkeypatch.setattr(prove, "RECORD", record)
    monkeypatch.setattr(prove, "DOC", doc)
    monkeypatch.setattr(prove, "REPO_ROOT", tmp_path)
    prove.main(["seeds", str(notebook), "--seeds", "404", "--out", str(tmp_path / "runs")])
    assert [r["code"] for r in prove.load(record)] == [before] != [prove.code_hash(notebook)]
    assert "No seed runs of the current notebooks yet." in doc.read_text()  # the edited notebook has none


def test_seeds_are_counted_apart_for_each_precision_the_cpu_chose(tmp_path):
    """10-12 train in bf16 on one CPU and in float32 on another: a seed passed in one says nothing of the other."""
    prove = _prove()
    nb = _notebook(tmp_path)
    code = prove.code_hash(nb)
    bf16 = [{**_row("seed", {"g": True}, True, code, seed=s), "precision": "bf16 autocast"} for s in (101, 202)]
    fp32 = [{**_row("seed", {"g": False}, False, code, seed=101), "precision": "float32"}]
    table = prove.render([*bf16, *fp32], [nb])
    assert "| 01_demo (bf16 autocast) | 2/2 | none | 101, 202 | 1.0 |" in table
    assert "| 01_demo (float32) | 0/1 | 101 | none | 1.0 |" in table  # not 2/2 with 101 run again and failed
    assert prove.all_good(bf16, [nb], "seeds") and not prove.all_good([*bf16, *fp32], [nb], "seeds")
    unchosen = _row("seed", {"g": True}, True, code, seed=101)  # 01-09: no precision, no label
    assert "| 01_demo | 1/1 | none | 101 | 1.0 |" in prove.render([unchosen], [nb])


def test_each_precision_the_cpu_chose_is_proved_on_its_own(tmp_path):
    """A learning-off run in float32 does not complete a bf16 proof, and a defect in one precision shows."""
    prove = _prove()
    nb = _notebook(tmp_path)
    code = prove.code_hash(nb)

    def run(kind, checks, passed, precision):
        return {**_row(kind, checks, passed, code), "precision": precision}

    bf16_on = run("prove-on", {"g": True}, True, "bf16 autocast")
    fp32_off = run("prove-off", {"g": False}, False, "float32")
    table = prove.render([bf16_on, fp32_off], [nb])
    missing_off, missing_on = "not proved: the learning-off run is missing", "not proved: the as-written run is missing"
    assert f"| 01_demo (bf16 autocast) | 1/1 | not run | {missing_off} | 2026-11-23 10:00, abc |" in table
    assert f"| 01_demo (float32) | not run | - | {missing_on} | 2026-11-23 10:00, abc |" in table
    assert not prove.all_good([bf16_on, fp32_off], [nb], "prove")
    bf16_off = run("prove-off", {"g": False}, False, "bf16 autocast")
    fp32_on, fp32_leak = run("prove-on", {"g": True}, True, "float32"), run("prove-off", {"g": True}, False, "float32")
    assert prove.all_good([bf16_on, bf16_off, fp32_on, fp32_off], [nb], "prove")  # proved in both
    rows = [bf16_on, bf16_off, fp32_on, fp32_leak]  # float32's latest learning-off run still passes "g"
    table = prove.render(rows, [nb])
    assert "| 01_demo (bf16 autocast) | 1/1 | 0/1 | proved |" in table
    assert "| 01_demo (float32) | 1/1 | 1/1: g | DEFECT: a learning check passes without learning |" in table
    assert not prove.all_good(rows, [nb], "prove")
    unchosen = _row("prove-on", {"g": True}, True, code)  # 01-09: no precision, no label
    assert "| 01_demo | 1/1 | not run |" in prove.render([unchosen], [nb])


def test_a_record_says_which_precision_the_cpu_chose(monkeypatch):
    from course_utils import hardware, presets
    from course_utils.hardware import Hardware
    from course_utils.results import record_results

    cpu, gpu = Hardware(kind="cpu", device="cpu", name="CPU"), Hardware(kind="gpu", device="cuda", name="H100")
    monkeypatch.setattr(presets, "_cpu_precision", [])  # this process's earlier choices, restored afterwards
    assert record_results("demo", {}, {"g": True})["cpu_precision"] is None  # never asked: 01-09
    presets.with_cpu_bf16(presets.get_preset("gpu", gpu), gpu)
    assert presets.cpu_precision_chosen() is None, "a GPU run is not the CPU's choice"
    presets.with_cpu_bf16(presets.get_preset("cpu-ci", cpu), cpu, enabled=False)
    assert record_results("demo", {}, {"g": True})["cpu_precision"] == "float32"
    monkeypatch.setattr(hardware, "cpu_bf16_pays", lambda: True)
    assert presets.with_cpu_bf16(presets.get_preset("cpu-ci", cpu), cpu).bf16
    assert record_results("demo", {}, {"g": True})["cpu_precision"] == "bf16 autocast"
