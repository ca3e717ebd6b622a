"""pytest-benchmark SLA suites, the SLA gate and a null backend (see docs/latency.md)."""
