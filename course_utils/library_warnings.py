"""Hide three warnings the installed libraries print about each other, and nothing else.

Every notebook's training cell used to print them, although none concerns the learner's code:

- ``is_gradient_checkpointing`` is deprecated: TRL 1.16 reads this transformers property whenever it samples
  (``trl.models.utils``); the new name, ``is_activation_checkpointing``, returns the same value.
- ``gradient_checkpointing`` is deprecated: ``GRPOConfig`` sets this old name to ``True`` by default, and
  transformers copies it to ``activation_checkpointing``; the course's notebooks set the new name themselves.
- ``'pin_memory' argument is set as true but no accelerator is found``: transformers asks the data loader to pin
  memory by default; without a GPU, PyTorch ignores the request and says so.

Each filter matches one message exactly (its start, and its category), so any other warning, a TRL one about your
config included, still shows. :mod:`course_utils.models` applies them when it is imported, as it applies
:mod:`course_utils.trl_fixes`.

>>> from course_utils.library_warnings import hide_library_warnings
>>> hide_library_warnings()  # doctest: +SKIP
"""

from __future__ import annotations

import re
import warnings

#: (start of the message, category): the warnings hidden, each explained in the module's docstring.
HIDDEN: tuple[tuple[str, type[Warning]], ...] = (
    ("`is_gradient_checkpointing` is deprecated", FutureWarning),
    ("`gradient_checkpointing` is deprecated", FutureWarning),
    ("'pin_memory' argument is set as true but no accelerator is found", UserWarning),
)


def hide_library_warnings() -> None:
    """Add one ``ignore`` filter per entry of :data:`HIDDEN` (calling it again adds nothing new)."""
    for start, category in HIDDEN:
        warnings.filterwarnings("ignore", message=re.escape(start), category=category)
