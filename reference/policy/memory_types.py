"""The memory types beyond an utterance's intent: `sensitive`, `entity` and `knowledge`.

**Sensitive** (`sensitive_kind`): an utterance that discloses

- health: an allergy, a medication, a condition (the `SAFETY` kinds of
  `reference.policy.vocabulary`), a diagnosis, an illness, a treatment ("I was diagnosed
  with high blood pressure", "我对青霉素过敏", "我在吃降压药", "我生病了");
- identity: an ID, passport, social security or driving licence number, a password
  ("my passport number is ...", "我的身份证号是..."), or a number the reference's PII
  detector finds of an identity kind (`type_vocabulary.SENSITIVE_PII_KINDS`);
- financial data: salary, income, debt, a bank card or account ("my salary is ...",
  "我的银行卡号是...", "我欠了五万贷款"), or a card number the detector finds.

A phone number or an e-mail address is contact data, not sensitive here: the PII rule
masks and seals it, and the assistant needs it.

**Entity** (`entities.named_entity`): a person, pet or thing the user names in a role the
vocabulary knows (`type_vocabulary.ENTITY_ROLES`): "my dentist is Dr. Lee", "my manager
is 王伟", "my dog Max ...", "我的经理叫王伟", "我家的狗叫旺财". It is stored in LTM as
an `entity` under the role ("dentist", "manager", "dog"), so a new name for the same
role supersedes the old one in either language. A role without a name ("my manager is
nice") is not an entity.

**Knowledge** (`entities.stated_knowledge`): a rule or figure of the user's world stated as
"the/our X is Y" where X ends in a noun of `type_vocabulary.KNOWLEDGE_NOUNS`: "our
return policy is 30 days", "the API rate limit is 100 requests per minute",
"公司的退货政策是30天". Stored in LTM as `knowledge` under X ("return_policy",
"api_rate_limit", "退货政策"): the keys a `knowledge_updated` event names.

**Precedence** of an utterance's STM type (`memory_type`), the first that holds:

1. a forget command or a question: the intent filter's `instruction` (a question
   discloses nothing);
2. `sensitive`: a health, identity or financial disclosure, whatever else it is (a
   preference, a profile fact, a request);
3. `entity`, then `knowledge`: the statement promotes one (`reference.promotion`);
4. the intent filter's kind (preference > profile > instruction > fact).

`sensitive` is the utterance's type, not an LTM category: its STM record (and the
episode consolidation makes of it) follows the strategy's `sensitive` rule, while the
structured fact promotion keeps is stored under its own category (a health fact stays
a `fact` for the long term, as R7 (docs/requirements.md) asks for "我对花生过敏";
personal data in it is sealed by the PII rule).
"""

from __future__ import annotations

from collections.abc import Iterable

from reference.models import Category, MemoryType
from reference.policy.forget_commands import parse_forget_command
from reference.policy.intent import is_question
from reference.policy.lexicon import safety_kind, sensitive_word_kind
from reference.policy.type_vocabulary import SENSITIVE_PII_KINDS

__all__ = ["memory_type", "sensitive_kind"]

_HEALTH_SAFETY = frozenset({"allergy", "medication", "condition"})


def sensitive_kind(text: str, disclosed: Iterable[str] = ()) -> str | None:
    """The sensitive kind the utterance discloses ("health", "identity", "financial"),
    or None. `disclosed`: the kinds the PII detector found in the raw utterance."""
    lower = text.lower()
    safety = safety_kind(lower)
    if safety in _HEALTH_SAFETY:
        return "health"
    found = sensitive_word_kind(lower)
    if found is not None:
        return found
    for kind in disclosed:
        if kind in SENSITIVE_PII_KINDS:
            return SENSITIVE_PII_KINDS[kind]
    return None


def memory_type(
    text: str,
    kind: MemoryType,
    *,
    category: Category | None = None,
    disclosed: Iterable[str] = (),
) -> MemoryType:
    """The STM type of a kept utterance: `kind` is the intent filter's, `category` the
    LTM category of the fact it states (None: none), `disclosed` the PII detector's
    kinds in the raw text. Precedence: the module docstring."""
    if kind is MemoryType.INSTRUCTION and (
        is_question(text) or parse_forget_command(text) is not None
    ):
        return kind
    if sensitive_kind(text, disclosed) is not None:
        return MemoryType.SENSITIVE
    if category is Category.ENTITY:
        return MemoryType.ENTITY
    if category is Category.KNOWLEDGE:
        return MemoryType.KNOWLEDGE
    return kind
