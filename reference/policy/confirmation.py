"""Confirming "forget everything": the replies that confirm or refuse, and what the
assistant says, in English and Chinese.

Seed 002 asks the assistant to warn and ask before erasing everything about a user. Under
a strategy with `forget_commands.confirm_everything`, the command erases nothing: the
assistant asks (`reply_text("ask", ...)`), and the user's next turn answers.

A reply **confirms** when it is made only of assent and politeness ("yes", "confirm",
"yes, delete everything", "ok go ahead", "是的", "确认", "确定删除", "好的，删吧"),
or says to erase everything ("delete everything", "全部删除"). It **refuses** when it is
made only of refusal and politeness ("no", "cancel", "don't delete", "取消", "不要",
"算了"). Anything else is neither: a sentence that starts with "yes" and goes on ("yes I
like tea", "是的我喜欢喝茶"), a mix ("yes, no", "不确定"), or an unrelated message. The
caller treats "neither" as a refusal that does not answer the question (nothing is
erased), so a doubtful reply never erases.
"""

from __future__ import annotations

import re
from typing import Literal

from reference.errors import InvalidInput

__all__ = ["Answer", "Language", "ReplyKind", "language_of", "parse_confirmation", "reply_text"]

Answer = Literal["confirm", "refuse"]
Language = Literal["en", "zh"]
ReplyKind = Literal["ask", "erased", "cancelled", "expired", "topic", "session"]

_EVERYTHING_EN = (
    r"(?:everything|it all|all of it|all my data|all (?:of )?my (?:data|information|info)"
    r"|all|my data|it|that)"
)
_ERASE_EN = r"(?:delete|erase|remove|wipe|clear|forget|purge)"
_CONFIRM_EN = (
    r"yes|yeah|yep|yup|ya|sure|ok|okay|k|confirm|confirmed|i confirm|correct|right"
    r"|affirmative|absolutely|definitely|of course|go ahead|do it|please do|proceed"
    r"|i'?m sure|i am sure|yes i'?m sure|i do|do so"
    rf"|(?:go ahead and )?{_ERASE_EN} {_EVERYTHING_EN}(?: (?:now|anyway|please))?"
)
_REFUSE_EN = (
    r"no|nope|nah|not now|cancel|cancel it|cancel that|stop|wait|hold on|never ?mind"
    r"|don'?t|do not|no don'?t|i changed my mind|changed my mind|keep it|keep everything"
    r"|keep my data|abort|no thanks|no thank you|not really|i'?m not sure|not sure"
    rf"|(?:don'?t|do not) {_ERASE_EN}(?: {_EVERYTHING_EN}| anything)?"
)
_POLITE_EN = r"please|thanks|thank you|thx|well|um+|hmm+|oh|ah|and|so|then|now|just"
_CONFIRM_ZH = (
    r"是的?|是啊|对的?|对啊|没错|好的?|好吧|好啊|嗯+|行|可以|确认|确定|确认删除|确定删除"
    r"|确定要删除?|我确定|我确认|删吧|删除吧|删掉吧|删了吧|全部删除|全部删掉|都删了?吧?"
    r"|删除所有(?:数据|记忆|信息)?|清空吧?|执行吧?|继续"
)
_REFUSE_ZH = (
    r"不|不要|不用|不是|不了|不行|不确定|不删|不要删除?|别删了?|别|取消|算了|先不|先不要"
    r"|等等|等一下|保留|我改主意了|还是不要了?|不需要"
)
_POLITE_ZH = r"请|谢谢|麻烦你?|呃|啊|哦|吧|呀|了|那|那就|就"
_SEP = r"[\s,，、.。!！~～;；:：…]*"


def _sequence(core: str, polite: str) -> re.Pattern[str]:
    unit = rf"(?:{core}|{polite})"
    return re.compile(rf"{_SEP}{unit}(?:{_SEP}{unit})*{_SEP}")


_EN_CONFIRM = _sequence(_CONFIRM_EN, _POLITE_EN)
_EN_REFUSE = _sequence(_REFUSE_EN, _POLITE_EN)
_ZH_CONFIRM = _sequence(_CONFIRM_ZH, _POLITE_ZH)
_ZH_REFUSE = _sequence(_REFUSE_ZH, _POLITE_ZH)
_EN_ONLY_POLITE = _sequence(_POLITE_EN, _POLITE_EN)
_ZH_ONLY_POLITE = _sequence(_POLITE_ZH, _POLITE_ZH)
_CJK = re.compile(r"[\u3400-\u9fff]")
#: A reply this long is a message of its own, not an answer.
_MAX_ANSWER_CHARS = 80


def parse_confirmation(text: str) -> Answer | None:
    """Whether `text` confirms or refuses a pending "forget everything", or None when it
    is neither (see the module docstring)."""
    if not isinstance(text, str):
        raise InvalidInput("text", f"must be a string, got {type(text).__name__}")
    lower = re.sub(r"\s+", " ", text.lower().replace("’", "'")).strip()
    if not lower or len(lower) > _MAX_ANSWER_CHARS:
        return None
    if _CJK.search(lower):
        confirm, refuse, polite = _ZH_CONFIRM, _ZH_REFUSE, _ZH_ONLY_POLITE
    else:
        confirm, refuse, polite = _EN_CONFIRM, _EN_REFUSE, _EN_ONLY_POLITE
    if polite.fullmatch(lower):
        return None  # "please", "谢谢": no answer
    if confirm.fullmatch(lower):
        return "confirm"
    if refuse.fullmatch(lower):
        return "refuse"
    return None


def language_of(text: str) -> Language:
    """The language to answer in: Chinese when the text has any CJK character."""
    return "zh" if _CJK.search(text) else "en"


def reply_text(
    kind: ReplyKind, language: Language, *, within_s: float = 0.0, topic: str | None = None
) -> str:
    """What the assistant says after a forget command or an answer to its question:
    `ask` (warn and ask, `within_s` the time to answer), `erased` (everything is gone),
    `cancelled` (nothing was erased), `expired` (a confirmation came too late), `topic`
    (a topic was forgotten) and `session` (the conversation was reset)."""
    if language == "zh":
        texts = {
            "ask": (
                "此操作将永久删除我记住的关于您的所有信息（包括所有对话），且无法恢复。"
                f"确定要全部删除吗？请在{_zh_duration(within_s)}内回复“确认”，回复其他内容将取消。"
            ),
            "erased": "好的，我已删除关于您的所有记忆。",
            "cancelled": "已取消，没有删除任何信息。",
            "expired": "删除请求已超时，没有删除任何信息。如仍需删除，请重新发出指令。",
            "topic": f"好的，我已忘记关于“{topic}”的信息。",
            "session": "好的，本次对话已重置。",
        }
    else:
        texts = {
            "ask": (
                "This will permanently erase everything I remember about you, from every "
                "conversation, and it cannot be undone. Do you want me to delete everything? "
                f'Reply "yes" within {_en_duration(within_s)} to confirm; anything else '
                "cancels."
            ),
            "erased": "Done: I have erased everything I remembered about you.",
            "cancelled": "Cancelled: nothing was erased.",
            "expired": (
                "The request to erase everything has expired, so nothing was erased. "
                "Ask again if you still want it."
            ),
            "topic": f"OK, I have forgotten what you told me about {topic}.",
            "session": "OK, this conversation has been reset.",
        }
    if kind not in texts:
        raise InvalidInput("kind", f"unknown reply kind {kind!r}")
    return texts[kind]


def _en_duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        minutes = int(seconds // 60)
        return f"{minutes} minute" + ("s" if minutes != 1 else "")
    return f"{seconds:g} seconds"


def _zh_duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}分钟"
    return f"{seconds:g}秒"
