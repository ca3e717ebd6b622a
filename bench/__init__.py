"""pytest-benchmark SLA suites, the SLA gate and a null backend (see bench/README.md)."""
