# Two commands: `make run` and `make test`. Both create .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# torch==2.13.0 first: it is the CPU build that lies on disk on these machines;
# the [calibrate] extra's range (torch<=2.13.0) then installs nothing more.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[test,dev,calibrate]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/simcluster run scenarios/puhti64.yaml

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check simcluster calibrate tests bench
	$(BIN)/ruff format --check simcluster calibrate tests bench

clean:
	rm -rf $(VENV) results
