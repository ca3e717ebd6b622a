"""Forget commands in Chinese and English: what the user asks to forget, and under which keys.

Three scopes, as the seed describes them: a topic ("忘记我的地址", "forget what I said
about my address"), everything about the user ("forget everything about me", "删除我所有
的数据"), and this conversation ("重置对话", "start over").

A command is an imperative, so each pattern is anchored at the start of a clause, after
optional politeness ("please", "can you", "请", "麻烦你"). That keeps out statements and
questions that use the same verbs: "I forgot my password", "I always forget my keys",
"忘记密码怎么办", "我忘记我的地址了". A negation is not a politeness word, so "don't
forget my birthday" and "别忘了提醒我" are not commands either. Deleting needs personal
data as its object ("delete my email", "删除我的地址"), or an explicit "from memory":
"删除我的订单" is an order action.

A command is said to the assistant, so only a sentence's first clause may be one, unless
what comes before it in the sentence only addresses the assistant ("ok, thanks, forget
my address", "谢谢，请忘记我的地址"), is a command itself ("reset the chat and forget my
email"), or the clause is addressed by a marker of its own ("..., so please forget my
old address"). A clause in the middle of a narrated sentence is not: "It's easy to get
lost and forget that", "I can relax, forget my troubles, and get lost in another world".
Objects that are no data are no command either: "forget to ..." (failing to do
something), "forget it" (never mind), "forget my troubles", "忘掉我的烦恼", "forget him".
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from reference.errors import InvalidInput
from reference.policy.lexicon import PROFILE_KEYS, SAFETY, TOPICS, WordSet

__all__ = ["ForgetCommand", "Scope", "parse_forget_command", "topic_keys"]

Scope = Literal["topic", "everything", "session"]
_SCOPES = ("topic", "everything", "session")


@dataclass(frozen=True, slots=True)
class ForgetCommand:
    """One forget command: a topic, everything about the user, or this session.

    Under scope "topic", `topic` is None when the command points back ("forget that",
    "don't remember this", "别记这个"): what is meant is what the user has just said.
    """

    scope: Scope
    topic: str | None = None

    def __post_init__(self) -> None:
        if self.scope not in _SCOPES:
            raise InvalidInput("scope", f"unknown scope {self.scope!r}; expected one of {_SCOPES}")
        if self.scope != "topic" and self.topic is not None:
            raise InvalidInput("topic", f"must be None under scope {self.scope!r}")
        if self.topic is not None and not self.topic.strip():
            raise InvalidInput("topic", "must not be empty (use None for 'what was just said')")

    @property
    def refers_back(self) -> bool:
        """Whether the command means the user's previous utterance, not a named topic."""
        return self.scope == "topic" and self.topic is None


_EVERYTHING = ForgetCommand("everything")
_SESSION = ForgetCommand("session")
_BACK = ForgetCommand("topic")

# Every command contains one of these; most utterances contain none, and skip the regexes.
_NEEDLES = re.compile(
    "forget|delete|erase|remove|wipe|clear|purge|scrub|drop|reset|restart|refresh|reboot|start"
    "|begin|remember|stor|sav|keep|record|log|track|memori"
    "|忘|删|清|抹|去掉|移除|销毁|记|存|保留|重置|重新开始|重启|重开|刷新|新的?对话"
)
# Sentences end at a full stop, a question or exclamation mark, a semicolon or a newline;
# a full stop only before a space or the end, so "No.12" and e-mail addresses stay whole.
_SENTENCES = re.compile(r"[。!！?？;；~～\n]+|\.(?=\s|$)")
# Within a sentence, clauses are cut at commas, and at a conjunction only before another
# command ("reset the chat and forget my email"), not inside a topic ("forget my address
# and phone number").
_PARTS = re.compile(
    r"[,，、]+|[:：](?!\d)"
    r"|\s+(?:and|then|and then|also|and also|so|and so)\s+(?=(?:also |then |please |just "
    r"|(?:can|could|would|will) you )*(?:forget|delete|erase|remove|wipe|clear|reset"
    r"|start over|don't|do not|stop)\b)"
    r"|(?:然后|另外|并且|同时|还有|再|所以)(?=(?:请|帮我|再|也|麻烦你?)*(?:忘记|忘掉|删除|删掉|清空"
    r"|清除|重置|重新开始|不要|别))"
)
# Clauses that only address the assistant: what may come before a command in a sentence.
_LEAD_IN = re.compile(
    r"(?:(?:ok|okay|alright|all right|thanks|thank you|thx|hi|hey|hello|well|so|oh|yes|yeah"
    r"|yep|sure|actually|also|and|one more thing|one last thing|by the way|btw|please|sorry"
    r"|no|nope|never ?mind|right|great|good|fine|cool|wait|hmm+|um+|now|then|first|lastly"
    r"|finally|assistant|bot|computer)\s*)+"
    r"|(?:好的|好吧|好|嗯+|谢谢|多谢|对了|另外|还有|哦|噢|那|那么|行|喂|你好|您好|小助手|助手"
    r"|麻烦你|麻烦|请|最后|首先|然后|算了|不好意思|抱歉)+"
)
# Clauses addressed to the assistant by a marker of their own.
_ADDRESSED = re.compile(
    r"^(?:(?:so|and|also|then|now|just)\s+)*(?:please|pls|kindly|(?:can|could|would|will) you"
    r"|i (?:want|need|would like|'d like) you to|make sure you)\b"
    r"|^(?:所以|然后|那|再|也)*(?:请|麻烦|帮我|劳驾|你|您)"
)
_SPACES = re.compile(r"\s+")

# --- English ------------------------------------------------------------------------

_EN_LEAD = (
    r"(?:(?:please|pls|plz|kindly|just|now|ok|okay|so|and|also|then|hey|hi|hello|oh|well"
    r"|actually|alright|thanks|thank you|one more thing|but|yes|yeah|sure)\s+)*"
)
_EN_ASK_YOU = (
    r"(?:(?:can|could|would|will) you\s+(?:please\s+)?(?:just\s+)?"
    r"|i (?:want|need|would like|'d like) you to\s+|i'd like you to\s+"
    r"|you (?:can|should|must|may|need to)\s+(?:now\s+)?|(?:please\s+)?go ahead and\s+"
    r"|make sure (?:you|to)\s+)"
)
# The user acting on their own data: "I want to delete my data", "let's start over". Not
# for "forget": "I want to forget about him" is a feeling, not an instruction.
_EN_ASK_SELF = (
    r"(?:i (?:want|need|would like|'d like) to\s+|i'd like to\s+|let'?s\s+|let us\s+"
    r"|(?:can|could|shall) we\s+|we (?:can|should)\s+)"
)
_EN_ACT = rf"^{_EN_LEAD}(?:{_EN_ASK_YOU}|{_EN_ASK_SELF})?{_EN_LEAD}"
_EN_FORGET = re.compile(rf"^{_EN_LEAD}{_EN_ASK_YOU}?{_EN_LEAD}forget(?:\s+about)?\s+(?P<obj>.+)$")
_EN_DELETE = re.compile(
    rf"{_EN_ACT}(?:delete|erase|remove|wipe|clear|purge|scrub|drop)\s+(?:out\s+|away\s+)?"
    r"(?P<obj>.+)$"
)
_EN_UNSTORE = re.compile(
    rf"^{_EN_LEAD}{_EN_ASK_YOU}?(?:please\s+)?(?:don't|dont|do not|stop|no longer|never again)"
    r"\s+(?:remember(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|keep(?:ing)?|record(?:ing)?"
    r"|log(?:ging)?|track(?:ing)?|memori[sz](?:e|ing))\s+(?P<obj>.+)$"
)
_EN_RESET = re.compile(rf"{_EN_ACT}(?:reset|restart|refresh|reboot)\s+(?P<obj>.+)$")
_EN_START_OVER = re.compile(
    rf"{_EN_ACT}(?:start|begin)\s+(?:over|afresh"
    r"|anew|again|from scratch|(?:a\s+)?(?:new|fresh)\s+(?:conversation|chat|session))"
    r"(?:\s+(?:please|from the (?:beginning|start)|with a clean slate))*$"
)
_EN_TAIL = re.compile(
    r"\s+(?:please|now|right now|for me|for good|permanently|completely|entirely|forever"
    r"|too|as well|thanks|thank you|immediately|at once|right away|altogether)$"
)
_EN_MEMORY_TAIL = re.compile(
    r"\s+(?:from|in|out of|off)\s+(?:your\s+|the\s+|my\s+)?(?:memory|memories|records?"
    r"|database|system|storage|brain|mind|files?|notes)$"
)
_EN_HELD_TAIL = re.compile(
    r"\s+(?:(?:that|which)\s+)?(?:you(?:'ve| have)?\s+(?:got|have|know|stored|saved|kept"
    r"|remember(?:ed)?|recorded|learned|learnt)|i(?:'ve| have)?\s+(?:gave|given|told|sent"
    r"|shared(?: with)?|provided|mentioned(?: to)?)\s+you)(?:\s+(?:about|on|of)\s+me)?$"
)
_EN_SESSION = re.compile(
    r"\b(?:(?:this|the|our|current|today's|that)\s+(?:conversation|chat|session|context"
    r"|thread|dialog(?:ue)?)s?|(?:chat|conversation) history|what we (?:talked about|discussed"
    r"|said|covered)|(?:said|told you|discussed|talked about|wrote)\s+(?:today|so far"
    r"|in (?:this|our) (?:conversation|chat)))\b|^(?:conversations?|chats?|sessions?|context)$"
)
_EN_EVERYTHING = re.compile(
    r"me|about me|all|everything|all of it|all (?:of )?that|all (?:about|of) me"
    r"|everything (?:else )?(?:about|on|regarding) me"
    r"|(?:all|everything|anything|whatever|what) (?:you (?:know|have|remember|stored|saved"
    r"|kept|learned|learnt)|i(?:'ve| have)? (?:told|said to|shared with|gave) you)"
    r"(?: about me| on me)?"
    r"|(?:all (?:of )?)?(?:my|the) (?:personal |private |saved |stored )?(?:data|info"
    r"|information|details|history|records?|memor(?:y|ies)|footprint)(?: (?:about|on|of) me)?"
    r"|(?:all (?:of )?)?(?:(?:the|your) )?(?:data|info|information|details|memor(?:y|ies)"
    r"|records?)(?: you have)? (?:about|on|of) me|(?:all )?personal (?:data|info|information"
    r"|details)|all (?:my |the |your )?(?:data|memories|history|records)"
    r"|(?:your |all )?(?:memory|memories)"
)
_EN_BACK = re.compile(
    r"it|this|that|these|those|this one|that one|(?:that|this) (?:part|bit|message)"
    r"|all (?:of )?(?:this|that)|the last (?:message|one|thing(?: i said)?|part)"
    r"|my last (?:message|sentence)|(?:the )?(?:previous|last) message"
    r"|what i (?:just )?(?:said|wrote|typed|told you|mentioned|sent)"
    r"(?: (?:just now|earlier|before|above|a moment ago|last))?"
)
_EN_SAID_PREFIX = re.compile(
    r"^(?:what|everything|anything|all(?: that)?|the (?:stuff|things?|bits?|parts?))\s+"
    r"(?:that\s+)?(?:i(?:'ve| have)?|you)\s+(?:said|told you|mentioned|wrote|shared|gave you"
    r"|typed|know|have|stored|saved|remember)\s+"
)
_EN_ABOUT_PREFIX = re.compile(
    r"^(?:(?:everything|anything|all|the (?:stuff|things?|info|information|details|data"
    r"|parts?|bits?))\s+(?:about|regarding|concerning|related to|on)|about|regarding"
    r"|concerning)\s+"
)
_EN_DETERMINER = re.compile(r"^(?:my|the|your|our|all(?: of)?|any|that|this|those|these)\s+")
# "Forget" with these is no erasing: failing to do something, or letting go of it.
_EN_NOT_ERASING = re.compile(
    r"(?:to|how to|how (?:it|that|this|things) (?:went|was|felt|goes)|what happened|whether"
    r"|if)\b"
)
_NOT_DATA = re.compile(
    r"(?:(?:all |about )?(?:my|your|our|the|his|her|their) )?(?:troubles?|worries|worry"
    r"|problems?|pain|past|stress|fears?|sorrows?|regrets?|mistakes?|ex|him|her|them|he|she"
    r"|they|you|yourself|myself|us|everyone|everybody|the world|time|it all|bad (?:times"
    r"|days|memories)|rest|bad stuff|day|week)"
    r"|(?:我的|我)?(?:烦恼|忧愁|痛苦|不愉快的?事?|不开心的?事?|过去|伤心事|伤心|难过的事|压力"
    r"|悲伤|不快|他|她|他们|她们|你|自己|时间)"
)
# "my worries for a while": the head of a topic, before a clause or an aside.
_TOPIC_HEAD = re.compile(r"\s+(?:for|and|so|while|because|until|when|or)\s+")
_EN_PERSONAL = re.compile(
    r"\b(?:id|identity|passport|card|credit card|bank|account number|ssn|social security"
    r"|location|contact|personal|private|preferences?|profile|details|info|information)\b"
)

# --- Chinese ------------------------------------------------------------------------

_ZH_MEMORY = "从(?:你的)?(?:记忆|记录|系统|数据库|脑子)(?:里|中)?(?:面)?"
_ZH_LEAD = (
    r"(?:(?:好的|好吧|好|那么|那|嗯|喂|你好|您好|谢谢|另外|还有|然后|现在|麻烦(?:你|您)?|劳驾"
    r"|请(?:你|您)?|帮(?:我|忙)|替我|给我|你|您|可以|能|能不能|可不可以|能否|是否可以|可否"
    rf"|我(?:想|要|希望|需要)(?:让|请)?(?:你|您)|直接|马上|立刻|立即|就|再|都|全都|彻底|永久"
    rf"|完全|一下|{_ZH_MEMORY})\s*)*"
)
_ZH_ASK_SELF = r"(?:我(?:想|要|希望|需要|申请)|我们|咱们|让我们)?"
_ZH_FORGET = re.compile(rf"^(?P<lead>{_ZH_LEAD})(?:忘记|忘掉|忘却)(?P<obj>.+)$")
_ZH_DELETE = re.compile(
    rf"^(?P<lead>{_ZH_LEAD}{_ZH_ASK_SELF}{_ZH_LEAD})(?:删除|删掉|删了|删去|清除|清空|清掉|清理"
    r"|抹掉|抹去|抹除|去掉|移除|销毁)(?:一下)?(?P<obj>.+)$"
)
_ZH_UNSTORE = re.compile(
    rf"^(?P<lead>{_ZH_LEAD})(?:不要|别|不用|无需|请勿|勿|不许|不准|不可以)再?(?:帮我)?"
    r"(?:记住|记录|记下|记|保存|存储|储存|存下|存|留存|保留)(?:下来|下)?(?P<obj>.*)$"
)
_ZH_BA = re.compile(
    rf"^(?P<lead>{_ZH_LEAD}{_ZH_ASK_SELF}{_ZH_LEAD})把(?P<obj>.+?)(?P<mem>{_ZH_MEMORY})?"
    r"(?:给我|都|全部|全都|彻底|永久)*(?P<verb>忘掉|忘记|忘了|忘|删掉|删除|删了|删|清除|清空"
    r"|清掉|抹掉|抹去|去掉|移除)(?:掉|了|吧|啊|呀|哦)*$"
)
_ZH_RESET = re.compile(
    rf"^(?P<lead>{_ZH_LEAD}{_ZH_ASK_SELF}{_ZH_LEAD})(?P<verb>重置|重新开始|重启|重开|刷新)"
    r"(?:一下)?(?P<obj>.*)$"
)
_ZH_NEW = re.compile(
    rf"^{_ZH_LEAD}{_ZH_ASK_SELF}{_ZH_LEAD}(?:开始|开启|开|换)(?:一个|一段|个)?新(?:的)?"
    r"(?:对话|会话|聊天)(?:吧)?$"
)
_ZH_TAIL = re.compile(r"(?:吧|啊|呀|哦|哈|嘛|好吗|好不好|可以吗|行吗|行不行|谢谢|谢啦|一下)+$")
_ZH_MODAL = re.compile("能|可以|可不可以|能不能|能否|可否")
_ZH_REQUEST = re.compile("请|帮|麻烦|劳驾|你|您")
_ZH_QUESTION = re.compile("怎么|怎样|如何|为什么|为啥|咋|什么|哪|吗|呢")
_ZH_SESSION = re.compile(
    r"(?:(?:这次|本次|当前|这个|这段|这轮|我们的?|咱们的?|刚才的?|之前的?|今天的?|所有的?"
    r"|全部的?)的?)?(?:对话|会话|聊天)(?:记录|内容|历史|上下文)?|上下文"
    r"|(?:我们|咱们)?(?:刚才|今天|之前)?(?:聊|谈)(?:过)?的(?:内容|东西|事情?|话)?"
)
_ZH_EVERYTHING = re.compile(
    r"我|关于我|有关我"
    r"|(?:关于我的?|有关我的?|我的)?(?:一切|所有|全部)的?(?:关于我的?|有关我的?|我的)?"
    r"(?:事情?|东西|内容|信息|资料|数据|记录|记忆|隐私|个人信息|话)?"
    r"|我的?(?:所有|全部|一切)的?(?:个人)?(?:信息|资料|数据|记录|记忆|隐私|东西|事情?|内容)?"
    r"|(?:关于我的?|有关我的?|我的)(?:个人)?(?:信息|资料|数据|记录|记忆|隐私|事情?|内容|东西)"
    r"|个人(?:信息|资料|数据|隐私)"
    r"|(?:你|您)?(?:知道|记得|记住|保存|存|记)下?的(?:关于我的?|有关我的?|我的)?"
    r"(?:一切|所有|全部)?(?:事情?|东西|内容|信息|资料|数据)?"
    r"|(?:你的|所有的?|全部的?)?记忆"
    r"|我(?:说|讲|告诉你|提)过的(?:所有|一切|全部)?(?:话|内容|事情?|东西)?"
)
_ZH_BACK = re.compile(
    r"(?:这|那)(?:个|条|些|件事|句话?|段话?|部分|条(?:信息|记录|消息))?|它"
    r"|我?(?:刚才|刚刚|上面|之前|前面|上一条)我?(?:说|讲|发|提|写)?(?:的|过的)?"
    r"(?:话|那句话?|这句话?|那条|这条|内容|消息|信息|记录)?"
)
_ZH_PREFIX = re.compile(
    r"^(?:我(?:刚才|刚刚|之前|以前|上次)?(?:说|讲|提|告诉你|给你|发|写)(?:过)?的"
    r"|(?:你|您)(?:知道|记得|记住|保存|存)(?:的)?|关于(?:我的?)?|有关(?:我的?)?|我的|这个|那个"
    r"|这条|那条|所有的?|全部的?)"
)
_ZH_SUFFIX = re.compile(r"的?(?:事情?|信息|内容|记录|资料|数据|一切|所有|东西|部分|那些|这些)$")
# "忘记" needs a possessive or a pointer after it: "忘记密码" is the forgotten-password
# button, "忘记我的密码" and "忘记这个" are commands.
_ZH_FORGET_OBJECT = re.compile(
    r"^(?:我|关于|有关|所有|全部|一切|这|那|刚|之前|以前|上面|前面|你知道|你记得|它)"
)
_ZH_PERSONAL = re.compile(
    "身份证|护照|银行卡|卡号|信用卡|账号|位置|定位|联系方式|个人|隐私|偏好|喜好|资料|信息"
)
_REFERS_TO_MESSAGE = re.compile("条|句|话|消息|信息|记录|说|message|said|wrote|typed|told|sent")

_Kind = Literal["forget", "delete", "unstore", "reset"]
_EN_KINDS: tuple[tuple[_Kind, re.Pattern[str]], ...] = (
    ("forget", _EN_FORGET),
    ("unstore", _EN_UNSTORE),
    ("reset", _EN_RESET),
    ("delete", _EN_DELETE),
)
_ZH_KINDS: tuple[tuple[_Kind, re.Pattern[str]], ...] = (
    ("forget", _ZH_FORGET),
    ("unstore", _ZH_UNSTORE),
    ("reset", _ZH_RESET),
    ("delete", _ZH_DELETE),
)


def parse_forget_command(text: str) -> ForgetCommand | None:
    """The forget command in `text`, or None when the user asks for nothing to be forgotten.

    When several clauses are commands, "everything" wins (it covers the others);
    otherwise the first one counts.
    """
    if not isinstance(text, str):
        raise InvalidInput("text", f"must be a string, got {type(text).__name__}")
    lower = _SPACES.sub(" ", text.lower().replace("’", "'").replace("\u3000", " "))
    if not _NEEDLES.search(lower):
        return None
    found: ForgetCommand | None = None
    for sentence in _SENTENCES.split(lower):
        # Whether every clause so far in this sentence addressed the assistant or was a
        # command: then the next clause may be a command too.
        open_to_command = True
        for clause in _PARTS.split(sentence):
            clause = clause.strip()
            if not clause:
                continue
            command = _parse_clause(clause)
            if command is not None and (open_to_command or _ADDRESSED.search(clause)):
                if command is _EVERYTHING:
                    return command
                found = found or command
                continue
            open_to_command = open_to_command and bool(_LEAD_IN.fullmatch(clause))
    return found


def _parse_clause(clause: str) -> ForgetCommand | None:
    if clause.isascii():
        return _parse_en(clause)
    return _parse_zh(clause) or _parse_en(clause)


def _parse_en(clause: str) -> ForgetCommand | None:
    if _EN_START_OVER.match(clause):
        return _SESSION
    for kind, pattern in _EN_KINDS:
        match = pattern.match(clause)
        if match:
            obj, memory = match.group("obj").strip(), False
            while (trimmed := _EN_TAIL.sub("", obj)) != obj or _EN_MEMORY_TAIL.search(obj):
                obj = _EN_MEMORY_TAIL.sub("", trimmed)
                memory = memory or obj != trimmed
            if _EN_SESSION.search(obj):
                return _SESSION
            if kind == "forget" and (
                _EN_NOT_ERASING.match(obj) or (obj in ("it", "it all") and not memory)
            ):
                return None  # "forget to call", "forget how it went", "forget it" (never mind)
            return _classify(obj, kind, memory, _EN_EVERYTHING, _EN_BACK, _en_topic)
    return None


def _en_topic(obj: str) -> tuple[str, bool]:
    held = _EN_HELD_TAIL.sub("", obj)
    topic = _EN_ABOUT_PREFIX.sub("", _EN_SAID_PREFIX.sub("", held))
    while (shorter := _EN_DETERMINER.sub("", topic)) != topic:
        topic = shorter
    return topic, held != obj  # "the address you have" is about memory


def _parse_zh(clause: str) -> ForgetCommand | None:
    if _ZH_NEW.match(clause):
        return _SESSION
    match = _ZH_BA.match(clause)
    if match:
        verb, lead = match.group("verb"), match.group("lead")
        if verb in ("忘了", "忘") and not (clause.endswith("吧") or _ZH_REQUEST.search(lead)):
            return None  # "把密码忘了" is "(I) forgot the password"; "把它忘了吧" asks
        # With 把 the object is marked already, so forgetting needs no pointer word:
        # "unstore" takes any topic.
        kind: _Kind = "unstore" if verb.startswith("忘") else "delete"
        return _zh_object(match.group("obj"), kind, lead, bool(match.group("mem")))
    for kind, pattern in _ZH_KINDS:
        match = pattern.match(clause)
        if match:
            lead, obj = match.group("lead"), match.group("obj")
            if kind == "reset" and not _ZH_TAIL.sub("", obj.strip()):
                # A bare "重置" / "重新开始" resets the conversation; a bare "重启" or
                # "刷新" more likely means a device or a page.
                return _SESSION if match.group("verb") in ("重置", "重新开始", "重开") else None
            return _zh_object(obj, kind, lead, "记忆" in lead or "记录" in lead)
    return None


def _zh_object(obj: str, kind: _Kind, lead: str, memory: bool) -> ForgetCommand | None:
    obj = _ZH_TAIL.sub("", obj.strip())
    if obj.endswith("吗") and _ZH_MODAL.search(lead):
        obj = _ZH_TAIL.sub("", obj[:-1])  # "能忘掉我的地址吗": a polite request
    # "忘记我的地址了" is "(I) forgot my address", and a question is no command.
    if obj.endswith("了") or _ZH_QUESTION.search(obj):
        return None
    if not obj or (kind == "forget" and not _ZH_FORGET_OBJECT.match(obj)):
        return None
    if _ZH_SESSION.fullmatch(obj):
        return _SESSION
    return _classify(obj, kind, memory, _ZH_EVERYTHING, _ZH_BACK, _zh_topic)


def _zh_topic(obj: str) -> tuple[str, bool]:
    topic = obj
    while (shorter := _ZH_PREFIX.sub("", topic)) != topic:
        topic = shorter
    return _ZH_SUFFIX.sub("", topic) or topic, False


def _classify(
    obj: str,
    kind: _Kind,
    memory: bool,
    everything: re.Pattern[str],
    back: re.Pattern[str],
    topic_of: Callable[[str], tuple[str, bool]],
) -> ForgetCommand | None:
    """The command an object names, once the conversation itself has been ruled out."""
    if everything.fullmatch(obj):
        return _EVERYTHING
    if kind == "reset":
        return None  # "reset my password", "重置密码": account actions
    if back.fullmatch(obj):
        if kind == "delete" and not (memory or _REFERS_TO_MESSAGE.search(obj)):
            return None  # "delete that", "删除这个" may be a file
        return _BACK
    topic, held = topic_of(obj)
    if not topic or _NOT_DATA.fullmatch(_TOPIC_HEAD.split(topic, maxsplit=1)[0]):
        return None  # "forget my troubles", "忘掉我的烦恼": no data to erase
    if everything.fullmatch(topic):
        return _EVERYTHING
    if kind == "delete" and not (memory or held or _is_personal(topic)):
        return None  # "delete my order", "删除我的订单": not memory, not personal data
    return ForgetCommand("topic", topic)


def _is_personal(topic: str) -> bool:
    """Whether deleting `topic` is about personal data (not an order, a file, an account)."""
    return bool(_profile_keys_in(topic) or _EN_PERSONAL.search(topic) or _ZH_PERSONAL.search(topic))


# --- topics to keys -----------------------------------------------------------------

# "number" alone is a phone number, but inside a topic it is often another one ("card
# number", "order number"), so it only counts as the whole topic.
_WHOLE_TOPIC_ONLY = frozenset({"number"})
_ALL_PROFILE = frozenset({"profile", "personal details", "个人资料", "资料"})
_ALL_PREFERENCES = frozenset({"preference", "preferences", "偏好", "喜好"})
_TOPIC_DETERMINER = re.compile(r"^(?:(?:my|the|your|our|all(?: of)?|any)\s+|我的|关于)")


def topic_keys(topic: str) -> set[str]:
    """The LTM keys a forget topic names: "地址" -> {"address"}, "preferences" -> all topics.

    Synonyms come from `reference.policy.lexicon`, so a topic maps to the key its facts were
    promoted under (a health or safety kind names the family of its keys: "allergies"
    -> "allergy", which covers "allergy:peanut"). Unless the topic is itself a synonym,
    the keys also hold the one promotion gives "my <topic> is ..." (spaces as
    underscores): "passport number" finds the fact `passport_number`.
    """
    if not isinstance(topic, str) or not topic.strip():
        raise InvalidInput("topic", "must be a non-empty string")
    norm = _SPACES.sub(" ", topic.strip().lower())
    while (shorter := _TOPIC_DETERMINER.sub("", norm)) != norm:
        norm = shorter
    norm = norm or topic.strip().lower()
    for key, synonyms in PROFILE_KEYS.items():
        if norm == key or norm in synonyms:
            return {key}
    if norm in _ALL_PROFILE:
        return set(PROFILE_KEYS)
    if norm in _ALL_PREFERENCES:
        return {name for name, _ in TOPICS}
    keys = _profile_keys_in(norm)
    keys.update(name for name, words in _TOPIC_WORDS if name == norm or words.search(norm))
    keys.update(name for name, words in _SAFETY_WORDS if name == norm or words.search(norm))
    # Always the key promotion gives "my <topic> is ...": "我的默认地址是..." is stored under
    # "默认地址", not "address".
    keys.add(_SPACES.sub("_", norm))
    return keys


_TOPIC_WORDS = tuple((name, WordSet(words)) for name, words in TOPICS)
_SAFETY_WORDS = tuple((name, WordSet(words)) for name, words in SAFETY)
_PROFILE_WORDS = tuple(
    (key, WordSet(s for s in synonyms if s not in _WHOLE_TOPIC_ONLY))
    for key, synonyms in PROFILE_KEYS.items()
)


def _profile_keys_in(text: str) -> set[str]:
    return {key for key, words in _PROFILE_WORDS if words.search(text)}
