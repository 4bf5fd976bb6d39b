# Two entry points (README): `make demo` and `make test`. Both set everything up first, idempotently:
# a virtualenv with the project, a Docker-API engine (Podman where no Docker engine runs), the images.
VENV ?= .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
SHELL := /bin/bash

.PHONY: setup venv engine images demo test nightly lint bench clean

setup: venv engine images

venv: $(VENV)/.installed
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,spark]'
	touch $@

engine:
	bash cluster/engine/setup-engine.sh >/dev/null
	bash cluster/engine/setup-host-tools.sh

images: venv engine
	$(BIN)/kafka-chaos image build
	$(BIN)/kafka-chaos image build --kafka-version 4.0.1 --no-toxiproxy  # ELR-off contrast (tests/chaos)
	$(BIN)/kafka-chaos image build --kafka-version 3.4.0 --no-toxiproxy  # the oldest supported (tests/integration/test_versions.py)

demo: setup
	$(BIN)/kafka-chaos run scenarios/demo.toml

test: setup
	cd images/toxiproxy/kafkatoxic && CGO_ENABLED=0 go test ./...  # the kafka toxic's parser and toxic
	$(BIN)/pytest

# What the nightly workflow runs: the tests marked `nightly` (deselected by `make test`).
nightly: setup
	$(BIN)/kafka-chaos image build --kafka-version 3.9.1 --no-toxiproxy  # the last 3.x (power-loss versions)
	$(BIN)/pytest -m nightly
	$(BIN)/kafka-chaos zoo --out results/nightly  # every known bug on both sides; rewrites docs/bug-zoo.md

lint: venv
	$(BIN)/ruff check .
	$(BIN)/mypy

clean: venv
	$(BIN)/kafka-chaos clean
