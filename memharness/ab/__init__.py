"""The A/B latency regression gate (`memharness bench --ab`): the candidate checkout
against a baseline commit, interleaved in one job on one machine (docs/latency.md).

`stats` (Harrell–Davis quantiles, paired bootstrap, decision rule), `arms` (the two
source trees), `worker` (one arm's process, run as a script), `processes` (starting and
talking to workers; the shared servers), `runner` (rounds, the design and its reasons),
`report` (table, ab.json, history), `command` (the CLI entry). Nothing is re-exported:
`memharness bench` without `--ab` never loads scipy or the worker.
"""
