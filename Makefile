# Set-up is part of every target: the first run creates .venv/ (pinned versions from requirements.txt),
# later runs reuse it and reinstall only when requirements.txt or pyproject.toml changed.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick test-nbgrader build benchmarks

# pip writes no bytecode; compileall writes the same files on every core (pip's own pass takes one): 110 s -> 90 s
# on two cores. A file of a newer Python's syntax (one in torch's tests) fails there as under pip, and is skipped.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -r requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile --no-deps -e .
	$(PY) -m compileall -qq -j 0 $$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))') || true
	touch $(STAMP)

demo: $(STAMP)   ## the main job: the whole instructor pipeline on the bundled sample class
	$(PY) -m autograder demo

# The suite runs on every core (pytest-xdist): a module, or a group of modules (tests/conftest.py), to a worker.
XDIST := -n auto --dist loadscope --no-loadscope-reorder

test: $(STAMP)   ## the kit's own test suite, after the linter (pyflakes and the line length) and the formatter's check (see pyproject.toml); ends with the wall time, the ten slowest units (tests/unit_times.py) and every skip with its reason
	$(VENV)/bin/ruff check autograder tests benchmarks
	$(VENV)/bin/ruff format --check autograder tests benchmarks
	$(PY) -m pytest $(XDIST) -rs

test-quick: $(STAMP)   ## the inner loop: a fast tier touching every wing (1 to 2 minutes on 2 cores, by machine)
	$(PY) -m pytest $(XDIST) -m "quick and not slow"

test-nbgrader: $(STAMP)   ## nbgrader's own tests of the commands the kit's plugins touch, with the kit's configuration loaded
	$(PY) -m pytest -m nbgrader_upstream tests/frontends/test_nbgrader_upstream.py

build: $(STAMP)  ## regenerate student_template/ and solutions/ from assignments/source/
	$(PY) -m autograder build

benchmarks: $(STAMP)
	$(PY) benchmarks/run_all.py
