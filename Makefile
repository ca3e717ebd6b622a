# The two commands of the README. Each sets itself up first (scripts/bootstrap is idempotent).
.PHONY: run test setup sla-gate ab-gate

setup:
	bash scripts/bootstrap

# The main job: the hand-written suite and 200 generated users, every strategy, embedded
# servers, two Ray workers (one torch thread each: two workers share two cores).
run: setup
	MEMH_EMBEDDER_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 .venv/bin/memharness run

test: setup
	bash scripts/test

# The CI latency gate: the bench suites at small sizes, then a 60 s load run. Both gate
# p95 on a bootstrap confidence interval (they fail only when its lower bound is over
# the SLA). One torch thread: on 2 shared cores the default stalls embeddings.
sla-gate: setup
	MEMH_EMBEDDER_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/memharness bench --size small --strategy hybrid
	MEMH_EMBEDDER_THREADS=1 HF_HUB_OFFLINE=1 MEMH_PREFIX=ciload .venv/bin/memharness load --strategy hybrid --users 10 --duration 60s --serial --run-id ci-load

# The CI regression gate: this commit against the previous one (the clean clone has the
# history), both run interleaved in this job on this machine; fails only when confident
# the candidate is slower (docs/latency.md, "The A/B gate").
ab-gate: setup
	MEMH_EMBEDDER_THREADS=1 HF_HUB_OFFLINE=1 .venv/bin/memharness bench --ab HEAD~1
