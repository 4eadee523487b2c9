# Two commands for everyone: `make book` (build the HTML book) and `make test` (every check;
# a failing step does not stop the later ones, and make test fails if any step failed).
# For readers: `make lab` (run the notebooks in JupyterLab) and `make pdf` (the book as a PDF).
# All create .venv when needed and install the pinned set (constraints.txt) once; the stamp
# files below make repeated runs skip the install until pyproject.toml or a lock file changes.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
JOBS ?= 2
PIP_STAMP := $(VENV)/.lecturekit-installed
LAB_STAMP := $(VENV)/.lecturekit-lab-installed
CHROMIUM := /usr/bin/chromium
# A CJK font, so the browser test's screenshots show the Chinese text instead of empty boxes.
CJK_FONT := /usr/share/fonts/truetype/wqy/wqy-microhei.ttc
# the exercise checker's feedback starts with ✅ / ❌ / 💡; without a colour emoji font the
# browser test's screenshots would show empty boxes where readers see the symbols
EMOJI_FONT := /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf
NOTEBOOKS := $(sort $(wildcard notebooks/*.ipynb))
NBVAL_SANITIZE := .ci/nbval-sanitize.cfg
# nbval runs JOBS notebooks side by side, each kernel on one thread (the notebooks set
# torch.set_num_threads(1); OMP_NUM_THREADS=1 covers numpy and MKL too): on 2 cores that beats
# one notebook at two threads, and two kernels of two threads each would wait on each other
# at every operation (benchmarks/threads.py). --dist loadfile keeps a notebook's cells in one
# kernel; the longest notebooks go first so that no worker is left alone with one at the end.
LONGEST_NOTEBOOKS := notebooks/capstone_pinyin.ipynb notebooks/06_2_exposure_bias.ipynb \
	notebooks/03_1_encoder_layer.ipynb
NBVAL_ORDER := $(foreach notebook,$(LONGEST_NOTEBOOKS),$(filter $(notebook),$(NOTEBOOKS))) \
	$(filter-out $(LONGEST_NOTEBOOKS),$(NOTEBOOKS))
NBVAL := $(PY) -m pytest --nbval --nbval-current-env --nbval-sanitize-with $(NBVAL_SANITIZE) \
	-q -p no:cacheprovider -n $(JOBS) --dist loadfile
ONE_THREAD_ENV := OMP_NUM_THREADS=1
# The second nbval pass (nbval-forced) stands in for a reader's different machine: the CPU
# math on other code paths than this machine's best ones (AVX2 kernels in ATen, MKL and
# oneDNN), and the last bit of every matrix product, softmax and normalisation nudged
# (.ci/nudge/nudge_last_bits.py, the kernels' IPython start-up file). An output that amplifies
# floating-point noise (a loss after hundreds of live float32 steps, a chaotic recurrence)
# fails here. tests/test_nudge.py measures what it catches on planted cells and that it leaves
# exact and stable results alone.
FORCED_PATH_ENV := ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 \
	$(ONE_THREAD_ENV) IPYTHONDIR=$(CURDIR)/_build/ipython-nudge
BOOK_LOG := _build/book.log
PDF_LOG := _build/pdf.log
PDF_DIR := _build/pdf
# JupyterLab refuses to run as root unless told; CI and containers run as root
LAB_ARGS ?= $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: help setup book lab pdf test notebooks lint unit kernels nbval nbval-forced book-strict \
	browser pdf-check clean

help:
	@echo "make book       build the HTML book into _build/html (creates .venv if needed)"
	@echo "make lab        install JupyterLab into .venv and open the notebooks in it"
	@echo "make pdf        print the whole book to _build/pdf/<repository name>.pdf"
	@echo "make test       run every check: ruff, mypy, unit, Triton interpreter, nbval, nbval as"
	@echo "                on another machine (AVX2, last bits nudged), strict book build,"
	@echo "                browser (book pages, search, live JupyterLab), PDF"
	@echo "make notebooks  re-execute every notebook in a fresh kernel and save its outputs"
	@echo "                (one notebook: make notebooks NOTEBOOKS=notebooks/00_setup.ipynb)"
	@echo "make clean      remove _build"

setup: $(PIP_STAMP)

# torch first and alone: the pin resolves to the CPU wheel where one is provided, instead of
# letting the resolver pick a multi-GB CUDA build while it installs everything else.
$(PIP_STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || { echo "==> creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> installing the pinned development set into $(VENV)"
	$(PY) -m pip install -q -c constraints.txt "torch==2.13.0"
	$(PY) -m pip install -q -c constraints.txt -e ".[gpu,book,test,lab,bench]"
	@touch $@

# What a reader needs to run the notebooks: the package (with Triton for chapter 7) and
# JupyterLab with the widget extension. Already there when the development set is.
$(LAB_STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || { echo "==> creating $(VENV)"; $(PYTHON) -m venv $(VENV); }
	@echo "==> installing lecturekit and JupyterLab into $(VENV)"
	$(PY) -m pip install -q -c constraints.txt "torch==2.13.0"
	$(PY) -m pip install -q -c constraints.txt -e ".[gpu,lab]"
	@touch $@

$(CHROMIUM) $(CJK_FONT) $(EMOJI_FONT) &:
	@echo "==> installing Debian's chromium, a CJK font and an emoji font for the browser test"
	$(SUDO) apt-get update -q
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q --no-install-recommends \
		chromium fonts-wqy-microhei fonts-noto-color-emoji

book: setup
	@rm -rf _build/html && mkdir -p _build
	$(VENV)/bin/jupyter-book build . --all -W -n --keep-going 2>&1 | tee $(BOOK_LOG)
	@if grep -q "WARNING" $(BOOK_LOG); then echo "ERROR: the book build logged warnings (see $(BOOK_LOG))" >&2; exit 1; fi
	@echo "Book built: open file://$(CURDIR)/_build/html/index.html"

lab: $(LAB_STAMP)
	@echo "==> JupyterLab on notebooks/ (start with 00_setup.ipynb; Ctrl+C twice stops it)"
	$(VENV)/bin/jupyter lab $(LAB_ARGS) notebooks/

# The whole book as one HTML page, printed by Debian's Chromium (book/make_pdf.py): Chinese
# text in an embedded CJK font, typeset math, the figures, a bookmark per chapter; offline.
pdf: setup $(CHROMIUM) $(CJK_FONT) $(EMOJI_FONT)
	@rm -rf _build/singlehtml && mkdir -p _build
	$(VENV)/bin/jupyter-book build . --builder singlehtml -W -n --keep-going 2>&1 | tee $(PDF_LOG)
	@if grep -q "WARNING" $(PDF_LOG); then echo "ERROR: the one-page build logged warnings (see $(PDF_LOG))" >&2; exit 1; fi
	$(PY) book/make_pdf.py _build/singlehtml $(PDF_DIR)
	@# the intro links the PDF beside the HTML book (book/_ext/downloads.py does it on a rebuild)
	@if [ -d _build/html ]; then cp $(PDF_DIR)/*.pdf _build/html/ && $(PY) book/_ext/downloads.py _build/html; fi

# Each step runs even when an earlier one failed; the last line lists every step's time.
TEST_STEPS := lint unit kernels nbval nbval-forced book-strict browser pdf-check

test: setup $(CHROMIUM) $(CJK_FONT) $(EMOJI_FONT)
	@start=$$(date +%s); failed=""; times=""; \
	for step in $(TEST_STEPS); do \
		step_start=$$(date +%s); \
		$(MAKE) --no-print-directory $$step || failed="$$failed $$step"; \
		times="$$times $$step $$(( $$(date +%s) - step_start )) s,"; \
	done; \
	echo "make test: total $$(( $$(date +%s) - start )) s:$${times%,}"; \
	if [ -n "$$failed" ]; then echo "make test: FAILED:$$failed" >&2; exit 1; fi

lint: $(PIP_STAMP)
	@echo "==> [1/8] ruff (lint and format check)"
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	@echo "==> [1/8] mypy (lecturekit/model, decoding, training, lab diagnostics)"
	$(VENV)/bin/mypy

unit: $(PIP_STAMP)
	@echo "==> [2/8] unit tests"
	$(PY) -m pytest -n $(JOBS) tests --ignore=tests/kernels -q --durations=10

kernels: $(PIP_STAMP)
	@echo "==> [3/8] Triton kernels under the interpreter (TRITON_INTERPRET=1)"
	@if [ -d tests/kernels ]; then \
		TRITON_INTERPRET=1 $(PY) -m pytest -n $(JOBS) tests/kernels -q; \
	else \
		echo "no tests/kernels folder: nothing to run"; \
	fi

nbval: $(PIP_STAMP)
	@echo "==> [4/8] nbval: re-run every notebook and compare its outputs"
	@mkdir -p _build
	@rm -f _build/nbval.xml
	env $(ONE_THREAD_ENV) $(NBVAL) --junitxml=_build/nbval.xml $(NBVAL_ORDER) || status=$$?; \
	$(PY) .ci/nbval_summary.py _build/nbval.xml; exit $${status:-0}

nbval-forced: $(PIP_STAMP)
	@echo "==> [5/8] nbval again as on another machine: AVX2 kernels, last bits nudged"
	@mkdir -p _build/ipython-nudge/profile_default/startup
	@rm -f _build/nbval-forced.xml
	cp .ci/nudge/nudge_last_bits.py _build/ipython-nudge/profile_default/startup/00-nudge.py
	env $(FORCED_PATH_ENV) $(PY) -c "import torch; print('torch', torch.__version__, \
		'CPU capability', torch.backends.cpu.get_cpu_capability(), 'threads', torch.get_num_threads())"
	env $(FORCED_PATH_ENV) $(NBVAL) --junitxml=_build/nbval-forced.xml $(NBVAL_ORDER) \
		|| status=$$?; \
	$(PY) .ci/nbval_summary.py _build/nbval-forced.xml "AVX2, last bits nudged"; exit $${status:-0}

book-strict: setup
	@echo "==> [6/8] strict book build (jupyter-book build . --all -W -n --keep-going)"
	@$(MAKE) --no-print-directory book

browser: $(PIP_STAMP) $(CHROMIUM) $(CJK_FONT) $(EMOJI_FONT)
	@echo "==> [7/8] browser test: every built page offline, self-test answers, search, live JupyterLab"
	@# two workers, each with its own Chromium: the pages' tests wait on rendering and fonts
	$(PY) -m pytest tests/test_book_html.py tests/test_book_selftests.py tests/test_book_reading.py \
		tests/test_book_phone.py \
		tests/test_lab.py \
		--run-book --run-lab -q -p no:cacheprovider -n $(JOBS) --durations=15

pdf-check: $(PIP_STAMP) $(CHROMIUM) $(CJK_FONT) $(EMOJI_FONT)
	@echo "==> [8/8] PDF: make pdf, then check pages, fonts, titles, bookmarks, figures, math"
	@$(MAKE) --no-print-directory pdf
	$(PY) -m pytest tests/test_pdf.py --run-book -q -p no:cacheprovider

# JOBS notebooks side by side, one thread each (as nbval runs them): the cells' recorded times
# are what tests/test_notebooks.py holds to each chapter's budget.
notebooks: $(PIP_STAMP)
	@printf '%s\n' $(NBVAL_ORDER) | xargs -P $(JOBS) -I NOTEBOOK env $(ONE_THREAD_ENV) sh -c \
		'start=$$(date +%s); echo "==> executing NOTEBOOK"; \
		$(VENV)/bin/jupyter nbconvert --to notebook --execute --inplace --log-level=WARN \
			--ExecutePreprocessor.timeout=600 NOTEBOOK || exit 1; \
		echo "    NOTEBOOK: $$(( $$(date +%s) - start )) s"'

clean:
	rm -rf _build
