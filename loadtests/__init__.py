"""Locust load tests of the reference memory (run `locustfile.py` with Locust)."""
