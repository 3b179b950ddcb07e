"""The course's on/off environment variables, read one way.

Each is on when unset, empty or ``1`` and off when ``0``; any other value stops with a message that names the
variable and says what each value does, instead of being read as "on" by accident.

>>> import os
>>> os.environ["GRPO_COURSE_EXAMPLE"] = "0"
>>> switch("GRPO_COURSE_EXAMPLE", on="use it", off="skip it")
False
"""

from __future__ import annotations

import os


def switch(name: str, *, on: str, off: str) -> bool:
    """Read the on/off variable ``name``; ``on`` and ``off`` describe what 1 and 0 do, for the error message."""
    value = os.environ.get(name, "1").strip()
    if value not in {"0", "1", ""}:
        raise ValueError(f"{name}={value!r} is not understood: set it to 1 ({on}) or 0 ({off}).")
    return value != "0"
