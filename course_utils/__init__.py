"""Helpers for the GRPO course notebooks. One module per concern:

* :mod:`course_utils.models`: load the course model (embedded offline GGUF or a Hub id).
* :mod:`course_utils.hardware`: detect CPU / T4 / Ampere+ and the precision each supports.
* :mod:`course_utils.presets`: named run sizes per hardware (``cpu-ci``, ``cpu``, ``t4``, ``gpu``).
* :mod:`course_utils.data`: seeded prompt sets, held-out splits, dataset validation.
* :mod:`course_utils.evaluation`: batched generation and metrics on held-out prompts.
* :mod:`course_utils.rewards`: the reward functions the lessons teach, with TRL's signature.
* :mod:`course_utils.plotting`: live reward plot and plots of logged metrics.
* :mod:`course_utils.results`: record what a notebook measured and whether its checks passed.
* :mod:`course_utils.proof`: paired gains over the model training started from, with a bootstrap interval.
* :mod:`course_utils.cache`: the course cache folder and ``make clean-cache``.
* :mod:`course_utils.preflight`: check a run's dataset, rewards, lengths, batch and precision before training.
* :mod:`course_utils.warm_start`: a short supervised warm start that teaches the answer format.
* :mod:`course_utils.objectives`: notebook 06's GRPO loss and its family (Dr. GRPO, DAPO, GSPO, CISPO, SAPO).
* :mod:`course_utils.tools`: tool use (notebook 10): a calculator tool, the ChatML tool template, data and rewards.
* :mod:`course_utils.trl_fixes`: fixes to the installed TRL (applied on import of :mod:`course_utils.models`):
  two for speed, equal in results up to float rounding, and one so that ``stop_strings`` in
  ``GRPOConfig.generation_kwargs`` work; and one to transformers, so that a stop string's token table is built
  once per vocabulary.

Repository tooling (running the notebooks headless, ``make doctor``) lives in ``scripts/``, not here: this
package is what a notebook imports, on any machine, without the repository's layout.
"""

__version__ = "0.1.0"

#: The course's GitHub repository ("owner/name"): Colab badges and set-up cells are derived from it.
REPOSITORY = "grpo-course/grpo-course"
