# The two commands of the README. Each sets itself up first (scripts/bootstrap is idempotent).
.PHONY: run test setup

setup:
	bash scripts/bootstrap

run: setup
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/memharness demo

test: setup
	bash scripts/test
