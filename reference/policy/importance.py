"""The importance rule in closed form: when does a memory with score s0 expire?

Under `ttl_from: written` (R10 in docs/requirements.md) the answer is direct: the write plus the TTL
the score grants (`deadline`). The rest of this note is the default, `last_access`.

Time τ is counted in seconds from the last access. The score falls linearly and stops
at zero: `s(τ) = max(0, s0 - k·τ)` with `k = decay_per_day / 86400`. The TTL a score
grants is the seed's, with the low-score rule:

    ttl(s) = low_ttl                   if s < low
    ttl(s) = base · (1 + 2·s / M)      otherwise (M = max_score; with M = 10 the seed's)

The memory expires at the first τ where `τ >= ttl(s(τ))`: it has outlived the TTL its
current score grants. Because s only falls, the condition is piecewise simple:

1. s0 < low: the score is low from the start and stays low, so τ* = low_ttl.
2. k = 0: the score never moves, so τ* = ttl(s0).
3. Otherwise, while the formula applies (s >= low, and s > 0 unclamped), the condition
   is linear: τ >= base·(1 + 2(s0 - kτ)/M)  <=>  τ >= τ1 = base·(1 + 2·s0/M) / (1 + 2·base·k/M).
   `τ - ttl(s(τ))` is strictly increasing there, so if τ1 falls inside that phase it is
   the answer. The phase ends at τ_low = (s0 - low)/k when low > 0: after it the TTL is
   the constant low_ttl and the first τ > τ_low with τ >= low_ttl is max(low_ttl, τ_low).
   When low = 0 the phase ends at τ_zero = s0/k instead: after it s = 0 and ttl = base,
   so the answer is base (τ1 beyond τ_zero means the condition failed at τ_zero, so
   τ_zero < base).

When the answer is τ_low itself, the condition holds just after it (the score is then
below `low`), not at it: τ* is the infimum. Stores treat `now >= expires_at` as expired,
so storing `last_access + τ*` enforces exactly this.

Because the TTL depends on the score at the moment of checking, a low-score jump (low_ttl
longer than base·(1 + 2·low/M)) can make the condition false again later; the memory is
gone by then. The first crossing is what counts.
"""

from __future__ import annotations

from reference.policy.rules import DAY_S, ImportanceRule


def ttl_for_score(rule: ImportanceRule, score: float) -> float:
    """The lifetime (seconds) that a score grants, with the low-score rule."""
    if score < rule.low_score:
        return rule.low_score_ttl_s
    return rule.base_s * (1.0 + 2.0 * score / rule.max_score)


def decayed_score(rule: ImportanceRule, score: float, elapsed_s: float) -> float:
    """The score `elapsed_s` seconds after the last access (clamped to [0, max_score])."""
    start = min(max(score, 0.0), rule.max_score)
    return max(0.0, start - rule.decay_per_day / DAY_S * max(elapsed_s, 0.0))


def score_after_access(rule: ImportanceRule, score: float, elapsed_s: float) -> float:
    """The score right after an access that came `elapsed_s` after the previous one."""
    return min(rule.max_score, decayed_score(rule, score, elapsed_s) + rule.access_boost)


def expiry_delay(rule: ImportanceRule, score: float) -> float:
    """Seconds from the last access until a memory with this score expires (see above)."""
    s0 = min(max(score, 0.0), rule.max_score)
    low = rule.low_score
    if s0 < low:
        return rule.low_score_ttl_s
    k = rule.decay_per_day / DAY_S
    if k == 0.0:
        return ttl_for_score(rule, s0)
    base, m = rule.base_s, rule.max_score
    tau_1 = base * (1.0 + 2.0 * s0 / m) / (1.0 + 2.0 * base * k / m)
    if low > 0.0:
        tau_low = (s0 - low) / k
        return tau_1 if tau_1 <= tau_low else max(rule.low_score_ttl_s, tau_low)
    tau_zero = s0 / k
    # tau_1 beyond tau_zero means the condition failed at tau_zero, so tau_zero < base.
    return tau_1 if tau_1 <= tau_zero else base


def deadline(rule: ImportanceRule, score: float, *, written_at: float, last_access: float) -> float:
    """When a memory expires under the rule, for its score as of `last_access`.

    `ttl_from: last_access`: `last_access + expiry_delay` (the score decays meanwhile).
    `ttl_from: written`: `written_at + ttl_for_score`, the seed's table.
    """
    if rule.ttl_from == "written":
        return written_at + ttl_for_score(rule, min(max(score, 0.0), rule.max_score))
    return last_access + expiry_delay(rule, score)
