# rill: the commands the README gives.
#
#   make run     create .venv if missing, install rill, serve 127.0.0.1:6379
#   make test    create .venv if missing, install rill with its test extras, run the whole suite
#   make bench   side-by-side benchmarks against Debian's redis-server (BENCH_QUICK=1 for a short run)
#   make lint    ruff, and import-linter's layering contracts (pyproject.toml)
#   make native  compile the hot core from its .py sources (setup.py; run and test do it first)
#   make fuzz    differential fuzzer against redis-server (FUZZ_SEEDS, FUZZ_OPS, FUZZ_RESP),
#                then Active-Active convergence runs, streams then every other type (FUZZ_SEEDS, FUZZ_AA_OPS)
#   make tcl     Redis's own Tcl units against rill and redis-server (TREE=redis-7.0.15 UNITS=...)
#   make tcl-tls the same in TLS mode (runtest --tls; needs tcl-tls and openssl)
#
# The venv is (re)installed only when pyproject.toml is newer than the stamp
# file, so every target is fast once the machine is set up.

# The interpreter the venv is made from: Debian's /usr/bin/python3 when it is 3.11+
# with venv support, else the python3 on PATH. Debian builds CPython with profile-
# guided and link-time optimisation and links libpython into the executable; a
# default source build (pyenv's, for one) runs rill's hot path 10-15% slower.
# `make PYTHON=...` (or distclean first) picks another.
PYTHON ?= $(shell for p in /usr/bin/python3 python3; do \
	$$p -c 'import sys, ensurepip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 \
	&& { echo $$p; exit 0; }; done; echo python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.rill-installed
EXTRAS ?= test,bench,lint,lzf,spark

# `make run` serves the address and port Redis uses by default, loopback only.
# Extra redis-server style options: make run RUN_ARGS="--port 7000 --save ''"
RUN_ARGS ?=
PYTEST_ARGS ?=
BENCH_ARGS ?=
# make fuzz: seeds x ops per RESP version; the defaults take a couple of minutes.
FUZZ_SEEDS ?= 4
FUZZ_OPS ?= 3000
FUZZ_RESP ?= 2,3
# Active-Active convergence runs: operations per seed at three instances.
FUZZ_AA_OPS ?= 3000

# make tcl / tcl-tls: a writable Redis 7.0.15 source tree (default: a fresh copy, in
# .cache/tcl-tree, of the release tools/redis_suite.py fetches once), and the units to run
# (default: all).
TREE ?=
TCL_TREE = $(if $(TREE),$(TREE),$$($(BIN)/python tools/redis_suite.py --copy .cache/tcl-tree))
UNITS ?=
# extra arguments for tools/run_tcl_units.py: --spawn (the suite starts its servers), --timeout N
TCL_ARGS ?=

.PHONY: run test bench lint native fuzz tcl tcl-tls venv clean distclean which-python

venv: $(STAMP)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# wheel first: Debian 12's venv pip (23.0) installs an sdist without a pyproject.toml
# (python-lzf) by the deprecated `setup.py install` unless wheel is there; with it, pip
# builds a wheel and caches it for the next venv.
# The compiled modules are built once, in place, after the install: pip's editable build
# would compile them in a temporary directory that the in-place build cannot see (setup.py).
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet wheel
	RILL_BUILD_NATIVE=0 $(BIN)/python -m pip install --quiet -e '.[$(EXTRAS)]'
	$(BIN)/python setup.py --quiet build_ext --inplace
	@touch $@

# The compiled hot core (setup.py): Cython's and the compiler's own timestamps rebuild
# only what changed. Without a compiler it says so and rill runs as pure Python
# (RILL_PURE=1 forces pure Python either way).
native: $(STAMP)
	$(BIN)/python setup.py --quiet build_ext --inplace

run: native
	$(BIN)/rill-server --bind 127.0.0.1 --port 6379 $(RUN_ARGS)

test: native
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: native
	$(BIN)/python -m bench $(BENCH_ARGS)

fuzz: $(STAMP)
	$(BIN)/python -m tests.fuzz --seeds $(FUZZ_SEEDS) --ops $(FUZZ_OPS) --resp $(FUZZ_RESP)
	$(BIN)/python -m tests.server.activeactive.convergence --seeds $(FUZZ_SEEDS) --ops $(FUZZ_AA_OPS)
	$(BIN)/python -m tests.server.activeactive.convergence --types --seeds $(FUZZ_SEEDS) --ops $(FUZZ_AA_OPS)

tcl: $(STAMP)
	$(BIN)/python tools/run_tcl_units.py --tree $(TCL_TREE) $(TCL_ARGS) $(UNITS)

tcl-tls: $(STAMP)
	$(BIN)/python tools/run_tcl_units.py --tls --tree $(TCL_TREE) $(TCL_ARGS) $(UNITS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

clean:
	rm -rf build dist .pytest_cache .ruff_cache .hypothesis
	find protocol storage persistence server -name '*.so' -delete
	rm -f protocol/_native.json storage/_native.json persistence/_native.json server/_native.json
	find . -path ./$(VENV) -prune -o -name __pycache__ -type d -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info

which-python:
	@$(PYTHON) --version; echo "venv interpreter: $(PYTHON)"
