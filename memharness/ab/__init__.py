"""The A/B latency regression gate (`memharness bench --ab`): the candidate checkout
against a baseline commit, interleaved in one job on one machine (bench/README.md).

`stats` (Harrell–Davis quantiles, paired bootstrap, decision rule), `arms` (the two
source trees), `worker` (one arm's process, run as a script), `runner` (servers, workers,
rounds), `report` (table, ab.json, history), `command` (the CLI entry). Nothing is
re-exported: `memharness bench` without `--ab` never loads scipy or the worker.
"""
