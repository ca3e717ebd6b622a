"""Personal data (PII) detection and masking: `RegexPiiMasker` and its helpers.

`masker.py` holds the masker and the checksum-checked number kinds; `phones.py`,
`english.py` and `chinese.py` find phone numbers, names and addresses.
"""

from reference.pii.masker import RegexPiiMasker, contains_raw_pii, is_valid_cn_id, luhn_ok

#: Every kind `RegexPiiMasker.detect` reports (scenario files use the same names).
KINDS = ("cn_id", "mobile", "phone", "email", "bank_card", "passport", "ssn", "name", "address")

__all__ = ["KINDS", "RegexPiiMasker", "contains_raw_pii", "is_valid_cn_id", "luhn_ok"]
