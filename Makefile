# Everyday targets. `make run` and `make test` install what they need into .venv first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
PROFILE ?= demo
SEEDS ?= 3

.PHONY: install run test test-all test-kernels lint format bench gpu-check footprints outputs-check clean-runs

RUN_STAMP := $(VENV)/.installed-run-stamp

# `make run` needs the package alone; the tests add the dev, bench and tracking extras.
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(BIN)/pip install -q -e '.[dev,bench,track]'
	touch $(STAMP)

install: $(STAMP)

# The main job: a small grid on the embedded CPU encoder (3 methods x 3 seeds), then tables with the
# claims tested on paired seeds, plots, and one HTML page with all of it (results/report.html).
run: $(RUN_STAMP)
	$(BIN)/harness grid cpu_demo --profile $(PROFILE) --seeds $(SEEDS)
	$(BIN)/harness tables cpu_demo --profile $(PROFILE)
	$(BIN)/harness plots --profile $(PROFILE)
	$(BIN)/harness report cpu_demo --profile $(PROFILE)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The test command from the README (and .ci/run): lint, types, then the default test run.
test: lint
	$(BIN)/pytest -q

# Everything, slow tests included.
test-all: lint
	$(BIN)/pytest -q -m "slow or not slow"

# The float-heavy tests again under other kernels of this processor (docs/correctness.md, "Tests on
# every processor"): ATen's scalar loops, MKL and oneDNN held to SSE4, MKL's reproducible mode.
KERNELS := "ATEN_CPU_CAPABILITY=default" "MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41" "MKL_CBWR=COMPATIBLE"
test-kernels: $(STAMP)
	@for k in $(KERNELS); do echo "== $$k"; env $$k $(BIN)/pytest -q tests/methods tests/encoder tests/evaluation tests/run || exit 1; done

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_sts_eval.py
	$(BIN)/python benchmarks/bench_transfer_eval.py
	$(BIN)/python benchmarks/bench_train_step.py
	$(BIN)/python benchmarks/bench_methods.py

# Run first whenever a GPU is at hand (minutes of device time): a paper-profile trial, the
# calibration file the grid's cost model reads (runs/calibration/), trials per GPU, a night
# rehearsal through the grid, then the dev evaluation, launch proxies and transfer (benchmarks/gpu_check.py).
# Numbers: results/gpu_check/gpu_check.json.
gpu-check: $(STAMP)
	$(BIN)/python benchmarks/gpu_check.py --out results/gpu_check --runs-dir runs

# The methods' footprints shipped with the code (harness/run/footprints.json), measured again.
footprints: $(STAMP)
	HARNESS_WRITE_FOOTPRINTS=1 $(BIN)/pytest -q tests/run/test_footprint_table.py

# Every committed table, claim and plot under docs/ rendered again from its records and compared
# byte for byte (scripts/outputs_check.py; its `digest` verb does the same for a `make run`'s results/).
outputs-check: $(STAMP)
	$(BIN)/python scripts/outputs_check.py docs

clean-runs:
	rm -rf runs results
