# The README's two commands:
#   make lab    set up (first time only) and open the series in JupyterLab
#   make test   set up (first time only) and run every test, notebooks included
# Both work on a fresh machine with no GPU. Other targets are for maintainers.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# Installed only when the environment has no torch yet: a torch that is
# already there (a conda env, a GPU machine's own build) is left alone.
TORCH  ?= torch==2.13.0
PORT   ?= 8888
STAMP  := $(VENV)/.installed

.PHONY: lab test test-unit test-notebooks test-other-gpus test-runall test-browser screenshots test-ipywidgets7 preflight clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv --system-site-packages $(VENV)
	@# pip 22.1 or newer installs this project from its pyproject.toml alone (PEP 660) and takes --config-settings;
	@# an older one is upgraded first
	@$(PY) -c "import pip, sys; sys.exit(tuple(int(x) for x in pip.__version__.split('.')[:2]) < (22, 1))" 2>/dev/null \
	  || $(PY) -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v 'is ignored' || true
	@$(PY) -c "import torch" 2>/dev/null || { echo "installing $(TORCH)"; \
	  $(PY) -m pip install -q --disable-pip-version-check "$(TORCH)" 2>&1 | grep -v 'is ignored' || true; }
	@# PYTHONWARNINGS: setuptools warns about editable installs on every first set-up; nothing to act on.
	@# editable_mode=compat: a plain path in a .pth file, not setuptools' import finder, which costs every Python
	@# start (a kernel, each `python -m helpers`) about 10 ms of imports
	@PYTHONWARNINGS=ignore $(PY) -m pip install -q --disable-pip-version-check -e ".[notebooks,test]" \
	  --config-settings editable_mode=compat 2>&1 | grep -v 'is ignored' || true
	@# JupyterLab is looked for, not imported: importing its server costs seconds here and make lab starts it anyway
	@$(PY) -c "import importlib.util, torch, ipywidgets, matplotlib, nbval, msgspec, helpers; \
	  assert importlib.util.find_spec('jupyterlab'), 'no jupyterlab'" \
	  || { echo "set-up failed: see the pip output above"; exit 1; }
	@# Kernels that say "run the cells above first"; no news pop-up over the reveals (helpers/classroom/lab_setup.py)
	@$(PY) -m helpers.classroom.lab_setup
	@touch $@

# Containers often run as root, which JupyterLab refuses without this flag.
ROOTFLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	cd notebooks && ../$(VENV)/bin/jupyter lab --port=$(PORT) $(ROOTFLAG) 00_before_we_start.ipynb

# Before the tests: the kernels' quiet IPython profile (helpers/classroom/lab_setup.py), and the helpers' bytecode.
# Where Python is told not to write bytecode (PYTHONDONTWRITEBYTECODE, as on some CI images and GPU hosts), every
# process the tests start (each notebook's kernel, each command line run, each rank) would compile the helpers again,
# 0.1 to 0.2 s apiece; compileall writes it once, and is a quick no-op when it is there already.
define PREPARE
@$(PY) -m helpers.classroom.lab_setup --quiet-profile .cache/ipython
@$(PY) -m compileall -q -j0 helpers tests
endef

# Recorded mode and default answers: what CI checks, the same on every machine.
# The two suites side by side (--output-sync prints each suite's output whole, when it ends): the notebooks' kernels
# (nbval) on one core; on the other the unit tests in one process, two simulated T4 runs (SIMULATED_GPUS=quick, below)
# starting in its background and taking two workers once the unit tests are done (tests/conftest.py). On two cores this packs the
# work tighter than pytest-xdist beside nbval and then the simulated GPUs (a fresh clone's make test took 6 min 28 s
# that way, 2026-12-01).
# PREPARE runs once first, so that the two suites do not both write the bytecode.
# The reader's robustness tests (any trace in, facts out; no notebook: 1.5 CPU-minutes) run on nbval's core once nbval
# is done, so that the two sides end together. With them, the unit side ended a minute and a half after nbval
# (2026-12-01: 6 min 39 s in all, a core idle for most of the last minute); with the reader's tests all moved, the other
# side ended two minutes after the unit side (7 min 9 s).
# 2026-12-04, the simulated GPUs cut to the T4's quick set: nbval + the robustness tests 256 s, the unit side 285 s,
# 6 min 0 s in all with the set-up; the reader's property tests (about 20 s) moved to nbval's side as well.
READER_TESTS := tests/test_robustness.py tests/test_property.py
test: $(STAMP)
	$(PREPARE)
	SIMULATED_GPUS=quick $(MAKE) --no-print-directory -j2 --output-sync=target test-unit test-notebooks \
	  UNIT_ARGS="tests $(addprefix --ignore=,$(READER_TESTS))" AFTER_NBVAL="$(READER_TESTS)"

# Every notebook on every simulated GPU (tests/test_other_gpus.py): make test runs only the T4's runs of notebooks 01
# and 10 (SIMULATED_GPUS=quick: QUICK_NOTEBOOKS), .ci/run all of them after it: the rest is a third run of the series,
# about 250 CPU-seconds, which took make test past six minutes on two cores.
test-other-gpus: $(STAMP)
	$(PREPARE)
	IPYTHONDIR=$(CURDIR)/.cache/ipython PROFILING_MODE=recorded PROFILING_HEADLESS=1 HYPOTHESIS_PROFILE=ci \
	  $(PY) -m pytest -q -p no:cacheprovider -p no:benchmark tests/test_other_gpus.py

# HYPOTHESIS_PROFILE=ci: the property tests run the same examples every time (tests/conftest.py).
# IPYTHONDIR: the kernels the tests start log errors only (helpers/classroom/lab_setup.py says why)
# Alone, one pytest worker per core (pytest-xdist), without the notebooks on simulated GPUs (tests/test_other_gpus.py,
# which test-notebooks runs); make test runs them here instead, in one process (UNIT_ARGS).
UNIT_ARGS ?= -n auto -p no:benchmark tests --ignore=tests/test_other_gpus.py
# What test-notebooks runs after nbval: alone, the notebooks on simulated GPUs; in make test, the reader's tests
AFTER_NBVAL ?= tests/test_other_gpus.py
test-unit: $(STAMP)
	$(PREPARE)
	IPYTHONDIR=$(CURDIR)/.cache/ipython PROFILING_MODE=recorded PROFILING_HEADLESS=1 HYPOTHESIS_PROFILE=ci \
	  $(PY) -m pytest -q -p no:cacheprovider $(UNIT_ARGS)

# PROFILING_LEAK_CHECK=1 and tests/series_leaks.py: the same run also proves that no answer is on screen before
# its question, over the whole series (the last item, series-leaks). Then every notebook on simulated GPUs (a T4, an
# L4, an A100: tests/test_other_gpus.py), unless NOTEBOOKS names some (make test runs them with the unit tests, and
# the reader's tests here instead: AFTER_NBVAL).
test-notebooks: $(STAMP)
	@mkdir -p .cache && rm -f .cache/journal-test.json
	$(PREPARE)
	IPYTHONDIR=$(CURDIR)/.cache/ipython PROFILING_MODE=recorded PROFILING_HEADLESS=1 PROFILING_LEAK_CHECK=1 PROFILING_JOURNAL=$(CURDIR)/.cache/journal-test.json \
	  PYTHONPATH=$(CURDIR)/tests:$(CURDIR) $(PY) -m pytest -q -p no:cacheprovider -p series_leaks --nbval-lax --nbval-current-env \
	  --nbval-sanitize-with notebooks/sanitize.cfg $(or $(NOTEBOOKS),notebooks)
	$(if $(NOTEBOOKS)$(if $(AFTER_NBVAL),,x),,IPYTHONDIR=$(CURDIR)/.cache/ipython PROFILING_MODE=recorded PROFILING_HEADLESS=1 HYPOTHESIS_PROFILE=ci \
	  $(PY) -m pytest -q -p no:cacheprovider -p no:benchmark $(AFTER_NBVAL))

# Run All in JupyterLab without answering: every notebook in a fresh kernel, recorded mode, NOT headless (questions
# wait for a click, the cells that would give an answer away are held back), a scratch journal; no cell may show an
# error (tests/runall). A second run of the series (3 min on two cores), so .ci/run runs it, not make test.
test-runall: $(STAMP)
	$(PREPARE)
	env -u PROFILING_HEADLESS -u PROFILING_LEAK_CHECK $(PY) -m pytest -q -p no:cacheprovider tests/runall

# The widgets in a real browser: JupyterLab + headless Chromium (Debian's chromium, driven by Playwright).
test-browser: $(STAMP)
	@$(PY) -c "import playwright" 2>/dev/null || $(PY) -m pip install -q --disable-pip-version-check "playwright>=1.40"
	$(PY) -m pytest -q -p no:cacheprovider tests/browser

# Maintainers: docs/img/'s screenshots of notebooks 01, 03 and 12 at 1280x800, and the layout checks on the
# rendered page (no wrapped table cell, no overlapping text): tests/browser/test_screenshots.py. About a minute.
screenshots: $(STAMP)
	@$(PY) -c "import playwright" 2>/dev/null || $(PY) -m pip install -q --disable-pip-version-check "playwright>=1.40"
	$(PY) -m pytest -q -s -p no:cacheprovider -m screenshots tests/browser

# Colab still ships ipywidgets 7.7: the prediction widgets must work there too.
test-ipywidgets7:
	@test -x .venv-ipywidgets7/bin/python || $(PYTHON) -m venv .venv-ipywidgets7
	@.venv-ipywidgets7/bin/python -m pip install -q --disable-pip-version-check "ipywidgets==7.7.*" ipython pytest 2>&1 | grep -v 'is ignored' || true
	PYTHONPATH=$(CURDIR) .venv-ipywidgets7/bin/python -m pytest -q -p no:cacheprovider tests/test_widgets.py

# An instructor's check before a workshop: every notebook, live, with a table and an HTML report.
preflight: $(STAMP)
	$(PY) -m helpers preflight

clean:
	rm -rf $(VENV) .venv-ipywidgets7 .cache traces/runs preflight screenshots
