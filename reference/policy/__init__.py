"""Pure forgetting policy: from a strategy, records, events and a time to what to do.

Nothing in this package reads a store or a clock; the caller passes `now`. The engine
that applies the decisions calls, per layer (STM `MemoryRecord`, LTM `Fact`):

- on write: `expiry.expires_at_on_write` -> the `expires_at` to store with the value;
- on an access that touches (a turn's retrieval, not a probe): `expiry.on_access` -> the
  new `expires_at` and `importance` to store with `last_accessed_at=now`;
- on a business event: `invalidation.invalidations_for` -> archive/delete decisions;
- on a sweep, batch by batch: `sweep.select_for_forgetting`;
- on retrieval: `ranking.rerank`.

The strategy itself (`strategy`, `rules`, `loading`, the YAML files in `builtin/`) and
the text rules a turn applies (`intent`, `forget_commands`, `confirmation`, `lexicon`)
live here too.
"""
