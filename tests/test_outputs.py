"""A run's output folder: always new, so an earlier run's model and record are never overwritten."""

from datetime import datetime

import pytest

from course_utils.outputs import OUTPUTS_ENV, RUN_MARKER, new_run_dir

NOON = datetime(2026, 11, 22, 12, 0, 5)


def test_each_run_gets_a_new_empty_folder_named_by_its_time(tmp_path):
    first = new_run_dir(tmp_path / "outputs" / "cpu", now=NOON)  # parents are created
    assert first == tmp_path / "outputs" / "cpu" / "2026-11-22_12-00-05"
    assert [p.name for p in first.iterdir()] == [RUN_MARKER], "new: nothing in it but the course's marker"
    (first / "model").mkdir()
    (first / "model" / "reproducibility.json").write_text("{}")
    second = new_run_dir(tmp_path / "outputs" / "cpu", now=NOON)  # same second: a suffix, not the same folder
    third = new_run_dir(tmp_path / "outputs" / "cpu", now=NOON)
    assert (second.name, third.name) == ("2026-11-22_12-00-05-2", "2026-11-22_12-00-05-3")
    assert (first / "model" / "reproducibility.json").read_text() == "{}", "the earlier run is untouched"


@pytest.mark.parametrize("existing", ["empty folder", "non-empty folder", "file"])
def test_never_returns_a_folder_or_name_that_already_exists(tmp_path, existing):
    taken = tmp_path / "2026-11-22_12-00-05"
    if existing == "file":
        taken.write_text("a file the learner made")
    else:
        taken.mkdir()
        if existing == "non-empty folder":
            (taken / "model.safetensors").write_text("weights")
    before = sorted(p.name for p in tmp_path.rglob("*"))
    run_dir = new_run_dir(tmp_path, now=NOON)
    assert run_dir.name == "2026-11-22_12-00-05-2" and [p.name for p in run_dir.iterdir()] == [RUN_MARKER]
    assert sorted(p.name for p in tmp_path.rglob("*")) == sorted([*before, run_dir.name, RUN_MARKER])


def test_a_file_where_the_output_folder_should_be_is_named(tmp_path):
    (tmp_path / "outputs").write_text("not a folder")
    with pytest.raises(NotADirectoryError, match=r"outputs is a file, but runs are saved in folders inside it"):
        new_run_dir(tmp_path / "outputs")


def test_course_outputs_dir_takes_the_relative_run_folders_only(tmp_path, monkeypatch):
    """`make test` sets COURSE_OUTPUTS_DIR, so a CI-mode run leaves no saved model in notebooks/outputs/."""
    notebooks, elsewhere = tmp_path / "notebooks", tmp_path / "run-folders"
    notebooks.mkdir()
    monkeypatch.chdir(notebooks)
    monkeypatch.setenv(OUTPUTS_ENV, str(elsewhere))
    assert new_run_dir("outputs/12/cpu-ci", now=NOON) == elsewhere / "outputs/12/cpu-ci/2026-11-22_12-00-05"
    assert not (notebooks / "outputs").exists()
    assert new_run_dir(tmp_path / "mine", now=NOON) == tmp_path / "mine/2026-11-22_12-00-05", "absolute: as given"
    monkeypatch.delenv(OUTPUTS_ENV)
    assert new_run_dir("outputs/12/cpu-ci", now=NOON).resolve() == notebooks / "outputs/12/cpu-ci/2026-11-22_12-00-05"
