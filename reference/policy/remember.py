"""Explicit requests to remember: "remember that ...", "请记住..." (`explicit_request`)."""

from __future__ import annotations

import re

# "Remember that ...", "please note ...", "记住...", "请记下...": the user asks for the
# statement that follows to be kept. Anchored at the start (after courtesy), so "I
# remember that day" and "我记得小时候" are no requests; a question ("do you remember
# ...?", "你还记得...吗") neither.
_EXPLICIT_EN = re.compile(
    r"^(?:(?:ok|okay|so|and|also|oh|hey|hi|btw|by the way|one more thing|just|important"
    r"|fyi)[\s,:!.-]+)*(?:(?:please|pls|kindly)\s+)?(?:(?:can|could|would|will) you\s+"
    r"(?:please\s+)?|i (?:want|need) you to\s+|i'd like you to\s+|make sure (?:you|to)\s+"
    r"|be sure to\s+)?(?:please\s+)?(?:always\s+)?(?:remember|note(?: down)?|make a note(?: of)?"
    r"|take (?:a )?note(?: of)?|keep in mind|bear in mind|don'?t forget|do not forget"
    r"|never forget|write down|jot down|memori[sz]e|for future reference"
    r"|for (?:your|the) records?)(?:\s+(?:this|that|it)(?=\s*[:,-]))?"
    r"(?:\s+(?:for me|for later|for the future))?"
    r"(?:\s*[:,-]\s*(?:that\s+)?|\s+that\s+|\s+)(?P<body>.+)$"
)
# What follows is no fact of the user: an errand ("remember to call"), a shared memory
# ("remember that time we ..."), advice to the listener ("remember, you're not alone").
_EXPLICIT_EN_NOT = re.compile(
    r"(?:to|when|how|what|where|who|why|whether|if|me|us|them|him|her|those|these|the days"
    r"|(?:that|the|this) (?:time|day|night|trip|summer|weekend|year|moment|place|song|movie"
    r"|one|guy|girl)|you(?:'re| are| can| should| have| will|'ll| were)?"
    r"|i'?m (?:always |still )?(?:here|there)|i (?:love|care about|believe in) you)\b"
)
_EXPLICIT_ZH = re.compile(
    r"^(?:(?:好的|好|嗯|对了|另外|还有|哦|那|麻烦你?|请你?|帮我|你|您|一定要?|务必|要|千万)[，,\s]*)*"
    r"(?P<verb>记住|记下来?|记一下|记好|记着|记得|备注一下|备注|备忘|别忘了|不要忘了|千万别忘了"
    r"|别忘记|不要忘记)(?:了|一下|下来|下)?(?:这个|这件事|这点|这一点)?[:：，,\s]*"
    r"(?P<body>.+)$"
)
_ZH_ERRAND_VERBS = frozenset(
    ("记得", "别忘了", "不要忘了", "千万别忘了", "别忘记", "不要忘记", "记着")
)
_POLITE_ASK = re.compile(
    r"(?:(?:can|could|would|will) you|请你?|麻烦你?|你能|能不能|可以)\s*(?:please\s+)?"
    r"(?:remember|note|keep in mind|记住|记下|记一下)"
)
_ZH_REMINISCE = re.compile("小时候|那时|那天|那次|当时|以前|上次|去年")
_QUESTION_END = re.compile(r"(?:[?？]|[吗么呢嘛][?？!！。.]?)\s*$")


def explicit_request(text: str) -> str | None:
    """The statement an explicit request to remember asks to keep, or None.

    "Remember that I'm allergic to penicillin" -> "I'm allergic to penicillin";
    "请记住我的门禁密码是1234" -> "我的门禁密码是1234". An errand ("remember to call
    mum", "记得带伞") or a question is no such request.
    """
    stripped = text.strip()
    lower = stripped.lower().replace("\u2019", "'")
    if _POLITE_ASK.match(lower):
        stripped = stripped.rstrip("?？ ")  # "Can you remember that ...?" asks nothing
        lower = lower.rstrip("?？ ")
    if not stripped or _QUESTION_END.search(stripped):
        return None
    if lower.startswith("do you remember") or lower.startswith("you remember"):
        return None
    match = _EXPLICIT_EN.match(lower)
    if match:
        body = match.group("body").strip()
        if body and not _EXPLICIT_EN_NOT.match(body):
            # In its original case, when lowercasing kept the length ("İ" does not).
            return stripped[-len(body) :] if len(lower) == len(stripped) else body
        return None
    match = _EXPLICIT_ZH.match(stripped)
    if match:
        body = match.group("body").strip()
        verb = match.group("verb")
        if not body or _ZH_REMINISCE.search(body[:6]):
            return None
        # "记得带伞" and "别忘了交电费" are errands: those verbs keep only facts of the user.
        if verb in _ZH_ERRAND_VERBS and not body.startswith("我"):
            return None
        return body
    return None
