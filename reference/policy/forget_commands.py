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
from reference.policy import forget_patterns as rx
from reference.policy.forget_topics import profile_keys_in

__all__ = ["ForgetCommand", "Scope", "parse_forget_command"]

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

_Kind = Literal["forget", "delete", "unstore", "reset"]
_EN_KINDS: tuple[tuple[_Kind, re.Pattern[str]], ...] = (
    ("forget", rx.EN_FORGET),
    ("unstore", rx.EN_UNSTORE),
    ("reset", rx.EN_RESET),
    ("delete", rx.EN_DELETE),
)
_ZH_KINDS: tuple[tuple[_Kind, re.Pattern[str]], ...] = (
    ("forget", rx.ZH_FORGET),
    ("unstore", rx.ZH_UNSTORE),
    ("reset", rx.ZH_RESET),
    ("delete", rx.ZH_DELETE),
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
    if rx.EN_START_OVER.match(clause):
        return _SESSION
    for kind, pattern in _EN_KINDS:
        match = pattern.match(clause)
        if match:
            obj, memory = match.group("obj").strip(), False
            while (trimmed := rx.EN_TAIL.sub("", obj)) != obj or rx.EN_MEMORY_TAIL.search(obj):
                obj = rx.EN_MEMORY_TAIL.sub("", trimmed)
                memory = memory or obj != trimmed
            if rx.EN_SESSION.search(obj):
                return _SESSION
            if kind == "forget" and (
                rx.EN_NOT_ERASING.match(obj) or (obj in ("it", "it all") and not memory)
            ):
                return None  # "forget to call", "forget how it went", "forget it" (never mind)
            return _classify(obj, kind, memory, rx.EN_EVERYTHING, rx.EN_BACK, _en_topic)
    return None


def _en_topic(obj: str) -> tuple[str, bool]:
    held = rx.EN_HELD_TAIL.sub("", obj)
    topic = rx.EN_ABOUT_PREFIX.sub("", rx.EN_SAID_PREFIX.sub("", held))
    while (shorter := rx.EN_DETERMINER.sub("", topic)) != topic:
        topic = shorter
    return topic, held != obj  # "the address you have" is about memory


def _parse_zh(clause: str) -> ForgetCommand | None:
    if rx.ZH_NEW.match(clause):
        return _SESSION
    match = rx.ZH_BA.match(clause)
    if match:
        verb, lead = match.group("verb"), match.group("lead")
        if verb in ("忘了", "忘") and not (clause.endswith("吧") or rx.ZH_REQUEST.search(lead)):
            return None  # "把密码忘了" is "(I) forgot the password"; "把它忘了吧" asks
        # With 把 the object is marked already, so forgetting needs no pointer word:
        # "unstore" takes any topic.
        kind: _Kind = "unstore" if verb.startswith("忘") else "delete"
        return _zh_object(match.group("obj"), kind, lead, bool(match.group("mem")))
    for kind, pattern in _ZH_KINDS:
        match = pattern.match(clause)
        if match:
            lead, obj = match.group("lead"), match.group("obj")
            if kind == "reset" and not rx.ZH_TAIL.sub("", obj.strip()):
                # A bare "重置" / "重新开始" resets the conversation; a bare "重启" or
                # "刷新" more likely means a device or a page.
                return _SESSION if match.group("verb") in ("重置", "重新开始", "重开") else None
            return _zh_object(obj, kind, lead, "记忆" in lead or "记录" in lead)
    return None


def _zh_object(obj: str, kind: _Kind, lead: str, memory: bool) -> ForgetCommand | None:
    obj = rx.ZH_TAIL.sub("", obj.strip())
    if obj.endswith("吗") and rx.ZH_MODAL.search(lead):
        obj = rx.ZH_TAIL.sub("", obj[:-1])  # "能忘掉我的地址吗": a polite request
    # "忘记我的地址了" is "(I) forgot my address", and a question is no command.
    if obj.endswith("了") or rx.ZH_QUESTION.search(obj):
        return None
    if not obj or (kind == "forget" and not rx.ZH_FORGET_OBJECT.match(obj)):
        return None
    if rx.ZH_SESSION.fullmatch(obj):
        return _SESSION
    return _classify(obj, kind, memory, rx.ZH_EVERYTHING, rx.ZH_BACK, _zh_topic)


def _zh_topic(obj: str) -> tuple[str, bool]:
    topic = obj
    while (shorter := rx.ZH_PREFIX.sub("", topic)) != topic:
        topic = shorter
    return rx.ZH_SUFFIX.sub("", topic) or topic, False


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
        if kind == "delete" and not (memory or rx.REFERS_TO_MESSAGE.search(obj)):
            return None  # "delete that", "删除这个" may be a file
        return _BACK
    topic, held = topic_of(obj)
    if not topic or rx.NOT_DATA.fullmatch(rx.TOPIC_HEAD.split(topic, maxsplit=1)[0]):
        return None  # "forget my troubles", "忘掉我的烦恼": no data to erase
    if everything.fullmatch(topic):
        return _EVERYTHING
    if kind == "delete" and not (memory or held or _is_personal(topic)):
        return None  # "delete my order", "删除我的订单": not memory, not personal data
    return ForgetCommand("topic", topic)


def _is_personal(topic: str) -> bool:
    """Whether deleting `topic` is about personal data (not an order, a file, an account)."""
    return bool(
        profile_keys_in(topic) or rx.EN_PERSONAL.search(topic) or rx.ZH_PERSONAL.search(topic)
    )
