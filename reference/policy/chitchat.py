"""Chit-chat: greetings, thanks, acknowledgements, laughter and small talk, which the
intent filter keeps out of STM (`reference.policy.intent`)."""

from __future__ import annotations

import re

# Each pattern is one chit-chat piece; a clause is chit-chat when it is made only of
# pieces ("ok thanks", "好的谢谢", "haha ok bye"). Pieces are matched at a position,
# never searched, so "查一下明天的天气" (a request) is not small talk about weather.
_CHITCHAT: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern))
    for reason, pattern in (
        (
            "greeting",
            r"(?:hi|hello|hey|hiya|yo|howdy|good (?:morning|afternoon|evening|night|day)"
            r"|morning|evening|greetings|what'?s up|sup"
            r"|how are (?:you|u|things)(?: doing)?(?: today)?"
            r"|how'?s it going|how do you do|nice to (?:meet|see) you|long time no see"
            r"|(?:good)?bye|see (?:you|ya)(?: later| soon| tomorrow)?|take care|later"
            r"|good ?night|have a (?:nice|good|great) (?:day|one|weekend|evening)"
            r"|there|again|bot|assistant|everyone|all"
            r"|你好|您好|嗨|哈喽|哈罗|早(?:上好|安)?|上午好|中午好|下午好|晚上好|晚安"
            r"|在吗|在不在|你好吗|最近(?:好吗|怎么样)|好久不见|再见|拜拜|回头见|明天见|大家好)",
        ),
        (
            "thanks",
            r"(?:thank you|thanks|thank u|thx|ty|cheers|many thanks|much appreciated"
            r"|appreciate it|(?:so|very) much|a lot|for (?:your |the |all the )?help"
            r"|谢谢|多谢|感谢|谢了|谢啦|辛苦了|麻烦了|太感谢了|感恩)",
        ),
        (
            "acknowledgement",
            r"(?:ok(?:ay)?|k|kk|sure|yes|yeah|yep|yup|no|nope|nah|fine|cool|great|nice"
            r"|alright|all right|got it|i see|understood|noted|right|perfect"
            r"|awesome|good|wow|oh|ah|hmm+|um+|uh+|well|indeed|exactly|true|agreed"
            r"|no problem|np|never ?mind|whatever|me too|same|maybe|sounds good(?: to me)?"
            r"|(?:i )?(?:like|love) (?:it|that|this)|that'?s (?:great|nice|good|fine|cool)"
            r"|this is (?:great|nice|good|fine|cool)|not bad|of course|no worries"
            r"|that'?s (?:all|it)(?: for now)?|nothing else|就这些|没有了|没别的了?"
            r"|好的?|好吧|好嘞|好滴|行|可以|嗯+|哦+|噢+|喔+|啊+|呀|啦|对|对的|是的|没错|收到"
            r"|明白了?|知道了|了解|懂了|没问题|没事|算了|随便|不用了?|不是|也是|真的吗?"
            r"|原来如此|这样啊|是吗|那就这样吧?|就这样吧?|太好了|不错|挺好的?|很好|你|您"
            r"|e*m+|吗|呢|吧|嘛|哈|哇|i'?m (?:doing )?(?:fine|good|ok|okay|great|well|alright)"
            r"|我(?:很|挺|也)?好|我还(?:好|行))",
        ),
        (
            "laughter",
            r"(?:(?:ha|he|hi|ho)+h?|lol+|lmao|rofl|xd+|hh+|233+|呵呵+|嘿嘿+|嘻嘻+|哈+"
            r"|笑死(?:我了)?|太好笑了)",
        ),
        (
            "small talk",
            r"(?:(?:今天|今儿|外面|这几天|最近)?的?(?:天气|天儿?)(?:真|很|太|好|挺|可|也|还|不)*"
            r"(?:好|不错|棒|热|冷|晴|舒服|糟糕|差|闷|晴朗)(?:啊|呀|哦|呢|了|的|哈)*"
            r"|(?:今天|外面)?(?:在)?(?:下雨|下雪|出太阳)了?(?:啊|呀|哦|呢)*"
            r"|(?:it'?s |what )?(?:a |such a )?(?:nice|lovely|beautiful|great|terrible|awful"
            r"|hot|cold|sunny|rainy) (?:weather|day)(?: today| outside)?"
            r"|the weather is (?:so |really |very )?(?:nice|great|lovely|bad|terrible|awful|hot"
            r"|cold)(?: today)?|(?:it'?s )?(?:raining|snowing|so hot|so cold)(?: today| outside)?"
            r"|(?:我)?(?:今天|最近)?(?:好|真|太)?(?:无聊|累|开心|困)(?:啊|呀|了|死了|哦)*"
            r"|i'?m (?:so |really |very )?(?:bored|tired|sleepy|happy)|happy friday|tgif"
            r"|you(?:'re| are) (?:so |very )?(?:funny|smart|great|awesome|cute|the best)"
            r"|你(?:真|好|太)?(?:聪明|可爱|厉害|棒|有趣)(?:啊|呀)?"
            r"|are you (?:a )?(?:robot|bot|human|real)|你是(?:谁|机器人|真人)吗?"
            r"|what(?:'s| is) your name|你叫什么(?:名字)?|tell me a joke|讲个笑话"
            r"|nothing|没什么|没事了|just chatting|随便聊聊|聊聊天|请问)",
        ),
    )
)
_CHITCHAT_MAX_CHARS = 60  # chit-chat is short; longer clauses are never dismissed as such
_PIECE_GAP = re.compile(r"[\s\W_]*")
_LATIN = re.compile(r"[a-z0-9]")
_STRIP = re.compile(r"^[\W_]+|[\W_]+$")


def chitchat_reason(clause: str) -> str | None:
    """The reason a clause is chit-chat (its first piece's), or None if it has content.

    A greedy scan, longest piece first at each position: linear in the clause, with
    none of the backtracking a regex of repeated alternatives would risk.
    """
    core = _STRIP.sub("", clause.strip()).lower()
    if not core:
        return "no content"
    if len(core) > _CHITCHAT_MAX_CHARS:
        return None
    first: str | None = None
    pos = 0
    while pos < len(core):
        end, reason = pos, ""
        for name, pattern in _CHITCHAT:
            m = pattern.match(core, pos)
            if m and m.end() > end:
                end, reason = m.end(), name
        # A piece must end at a word edge: "no" is chit-chat, "now" and "nothing new" not.
        if end == pos or (
            end < len(core) and _LATIN.match(core, end - 1) and _LATIN.match(core, end)
        ):
            return None
        first = first or reason
        gap = _PIECE_GAP.match(core, end)
        pos = gap.end() if gap else end
    return first
