"""`make outputs` and `make clean-outputs` (scripts/clean_outputs.py): older runs go only when marked and confirmed."""

from datetime import datetime

import pytest
from repo_modules import load

from course_utils.outputs import new_run_dir

clean_outputs = load("scripts/clean_outputs.py")


def _runs(parent, times):
    """Run folders made by new_run_dir at the given (hour, minute) times, each holding a 'model' file."""
    runs = []
    for hour, minute in times:
        run = new_run_dir(parent, now=datetime(2026, 11, 30, hour, minute))
        (run / "model.safetensors").write_bytes(b"w" * 1000)
        runs.append(run)
    return runs


@pytest.fixture
def outputs(tmp_path):
    root = tmp_path / "notebooks" / "outputs"
    old_08, new_08 = _runs(root / "08_your_own_data" / "cpu", [(9, 0), (10, 0)])
    same_second = _runs(root / "08_your_own_data" / "cpu", [(10, 0)] * 10)  # <time>-2 ... <time>-11
    (only_12,) = _runs(root / "12_learned_rewards" / "cpu-ci", [(8, 0)])
    mine = root / "08_your_own_data" / "cpu" / "2026-11-30_07-00-00"  # named like a run, but no marker: yours
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    return {"root": root, "old": [old_08, new_08, *same_second[:-1]], "newest_08": same_second[-1],
            "only_12": only_12, "mine": mine}  # fmt: skip


def test_the_newest_runs_of_each_notebook_and_preset_are_kept(outputs):
    runs = clean_outputs.find_runs([outputs["root"]])
    assert outputs["mine"] not in runs, "a folder without the marker is never a run"
    kept, removed = clean_outputs.plan(runs, keep=1)
    assert kept == sorted([outputs["newest_08"], outputs["only_12"]])  # -11 is newer than -2: numeric order
    assert removed == sorted(outputs["old"])
    assert clean_outputs.plan(runs, keep=0) == ([], sorted(runs))
    assert clean_outputs.plan(runs, keep=20) == (sorted(runs), [])


def test_listing_removes_nothing(outputs, capsys):
    before = sorted(outputs["root"].rglob("*"))
    assert clean_outputs.main([], roots=[outputs["root"]]) == 0
    assert sorted(outputs["root"].rglob("*")) == before
    assert "13 run folders" in capsys.readouterr().out  # 2 + 10 of 08, 1 of 12


def test_without_a_yes_nothing_is_removed(outputs, capsys):
    before = sorted(outputs["root"].rglob("*"))
    assert clean_outputs.main(["--clean"], roots=[outputs["root"]]) == 1  # pytest's stdin is not a terminal
    out = capsys.readouterr().out
    assert "Nothing removed" in out and "make clean-outputs CONFIRM=yes" in out
    assert clean_outputs.main(["--clean"], roots=[outputs["root"]], ask=lambda prompt: "no") == 0  # asked: declined
    assert sorted(outputs["root"].rglob("*")) == before


def test_confirmed_removes_only_the_older_marked_runs(outputs, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.txt").write_text("not the course's")
    (outputs["root"] / "08_your_own_data" / "cpu" / "2026-11-30_06-00-00").symlink_to(elsewhere)  # a link: not a run
    assert clean_outputs.main(["--clean", "--keep", "1"], roots=[outputs["root"]], ask=lambda prompt: "yes") == 0
    assert not any(run.exists() for run in outputs["old"])
    assert outputs["newest_08"].is_dir() and outputs["only_12"].is_dir()
    assert (outputs["mine"] / "notes.txt").read_text() == "keep me"
    assert (elsewhere / "precious.txt").read_text() == "not the course's"


@pytest.mark.parametrize("keep", ["-1", "one", "1.5"])
def test_a_bad_keep_is_refused_naming_keep(keep, capsys):
    with pytest.raises(SystemExit):
        clean_outputs.main(["--clean", "--keep", keep], roots=[])
    assert "KEEP (--keep) must be a whole number" in capsys.readouterr().err
