"""Bilingual (Chinese and English) rule-based intent filter for short-term memory.

An utterance is kept when it carries something a later turn may need: a forget command,
a preference, a profile fact, an instruction or request, or a fact (a date, a number, a
named thing, something that happened or will happen). Everything else (greetings,
thanks, acknowledgements, laughter, small talk, bare emoji) is chit-chat and stays out
of STM, so it is never retrieved in place of what matters ("今天天气真好" next to
"空调不制冷").

Clauses that are pure chit-chat are set aside first: "谢谢！帮我订明天的票" keeps the
request although it opens with thanks. The patterns are compiled once, match lowercased
text without IGNORECASE (three times faster), and English and Chinese rules only run
on text that has Latin letters or CJK characters: the filter sits on every turn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from reference.models import MemoryType
from reference.policy.forget_commands import parse_forget_command
from reference.policy.lexicon import safety_kind
from reference.text import IntentDecision, IntentFilter

__all__ = [
    "RuleIntentFilter",
    "explicit_request",
    "is_forget_command",
    "is_stable_preference",
]

T = TypeVar("T")

#: How many texts each memoised rule remembers (least recently used dropped first), and
#: the longest text it remembers: utterances are short, and the bound on memory is then
#: a few megabytes per rule whatever the input.
MEMO_SIZE = 16_384
MEMO_MAX_CHARS = 1_000


def memoised(rule: Callable[[str], T]) -> Callable[[str], T]:
    """`rule`, a pure function of the text, with its answers remembered (see MEMO_SIZE).

    A turn asks the same question about the same text several times (the intent filter,
    fact extraction, promotion), and scripted conversations repeat texts across users.
    """
    remembered = functools.lru_cache(maxsize=MEMO_SIZE)(rule)

    @functools.wraps(rule)
    def answer(text: str) -> T:
        return remembered(text) if len(text) <= MEMO_MAX_CHARS else rule(text)

    return answer


class _Rule:
    """One kind's English and Chinese patterns, run on lowercased text.

    `needles`, when given, are substrings one of which every pattern needs: a C-speed
    `in` test that skips the regex on most texts.
    """

    __slots__ = ("en", "needles", "zh")

    def __init__(self, en: Sequence[str], zh: Sequence[str], needles: Sequence[str] = ()) -> None:
        # MULTILINE: clauses are joined by newlines, and ^/$ anchor to a clause.
        self.en = re.compile("|".join(en), re.MULTILINE) if en else None
        self.zh = re.compile("|".join(zh), re.MULTILINE) if zh else None
        self.needles = tuple(needles)

    def search(self, lower: str, *, latin: bool, cjk: bool) -> bool:
        if self.needles and not any(n in lower for n in self.needles):
            return False
        if latin and self.en is not None and self.en.search(lower):
            return True
        return cjk and self.zh is not None and self.zh.search(lower) is not None


_HAS_CJK = re.compile("[\u3400-\u9fff\uf900-\ufaff]")
_HAS_LATIN = re.compile("[a-z]")

# --- kept utterances -------------------------------------------------------------

_STABLE_EN = [
    # "always"/"never" about what the assistant should do, not "it always crashes" or
    # "the parcel never arrived", which are complaints (facts).
    r"\balways\b(?! (?:crash|fail|break|freez|hang|late|slow|wrong|broken|down))",
    r"\bnever\b(?! (?:arrived|received|got|came|showed|heard|happened|worked|answered"
    r"|replied|responded|delivered|forget))",
    r"\bdefault\b",
    r"\bfrom (?:now|here) on\b",
    r"\bgoing forward\b",
    r"\bevery time\b",
    r"\bin (?:the )?future\b",
    r"\bfor all (?:my |future )?orders\b",
]
_STABLE_ZH = [
    "默认",
    "总是",
    "以后(?:都|请|就|也|一律|统一|全部|每次)",
    "今后",
    # Bare "一直" is too often "我一直在等" (I have been waiting): a habit needs a verb.
    "一直(?:都|用|喜欢|是|选|坐|住|买|要|点|喝|吃|订|走)",
    "每次都",
    "永远",
    "一律",
    "从(?:现在|今天|此|今以后)(?:开始|起|以后)?",
]
_STABLE = _Rule(_STABLE_EN, _STABLE_ZH)

_PREFERENCE = _Rule(
    en=[
        # "I'd like to book" is a request, not a taste: no "would like" here.
        r"\bi (?:really |much |do |also |just |still |usually )?(?:prefer|like|love|enjoy|hate"
        r"|dislike|can'?t stand)\b",
        r"\bi(?:'d| would) (?:rather|prefer|much rather)\b",
        r"\bi (?:don'?t|do not|never) (?:like|want|eat|drink|use)\b",
        r"\bmy (?:favou?rite|preferred|usual|go-to)\b",
        r"\b(?:i'?m|i am) (?:a )?(?:vegetarian|vegan|allergic)\b",
        r"\b(?:i'?m|i am) (?:so |super |really |very |totally )?(?:a (?:big |huge )?fan of"
        r"|keen on|into|passionate about|crazy about|interested in|not a fan of)\b",
        r"\bi'd love to\b|\bi (?:really )?(?:adore|miss|can't live without)\b",
        *_STABLE_EN,
    ],
    zh=[
        "喜欢|爱(?:吃|喝|用|看)|偏好|偏爱|倾向于?|习惯(?:用|于|了)?|更想|宁愿|(?:最|比较|更)爱",
        "讨厌|受不了|不吃|不喝|忌口|过敏|吃素|最好(?:是|用|都)",
        *_STABLE_ZH,
    ],
)

_PROFILE = _Rule(
    en=[
        # "my new address is", "my current phone number is": a restated profile value.
        r"\bmy (?:(?:new|current|updated|latest|present|correct) )?(?:home |work |office "
        r"|shipping |delivery |billing |mailing )?address\b",
        r"\bmy (?:full |first |last )?name is\b",
        # The phone or e-mail as a value, not the device: "I dropped my phone" is no profile.
        r"\bmy (?:(?:new|current|updated|latest|present|correct) )?(?:(?:phone|mobile|cell)"
        r"(?: number)?|number|e-?mail(?: address)?) (?:is|was|=|:|has changed|changed)",
        r"\bmy (?:(?:new|current|updated|latest|present|correct) )?(?:birthday|date of birth|job"
        r"|title|role|company|employer|wife|husband|son|daughter|hometown|city)\b",
        r"\b(?:i|we) (?:now |currently )?live (?:in|at|on|near)\b",
        r"\b(?:i|we)(?:'ve| have)?(?: just| recently| finally)? (?:moved|relocated) to\b",
        r"\bi work (?:at|for|in|as)\b",
        r"\bi(?:'m| am) (?:from|based in|working at|\d+ years old)\b",
        r"\bi was born\b",
    ],
    zh=[
        "我(?:的)?(?:新的?|现在的?|目前的?|最新的?|当前的?)?(?:家庭|收货|公司|办公|送货|常用|邮寄)?"
        "(?:地址|住址)",
        "我(?:的)?(?:新的?|现在的?|目前的?|最新的?|当前的?)(?:电话|手机号?|邮箱|公司|单位|工作)",
        "我住(?:在|的)|我家(?:在|住)|我(?:搬|搬家)(?:到|去)|我(?:叫|姓)",
        "我的(?:名字|姓名|电话|手机|邮箱|生日|身份证|护照|工作|职位|公司|单位|老家|籍贯)",
        "我(?:在|于).{1,12}(?:工作|上班|上学|读书)",
        "我是.{1,12}(?:的员工|的经理|的客户|的会员|人|工程师|老师|医生|学生|律师)",
        "我今年\\d+岁|我(?:出生|生)于|^我(?:是|叫)[\u4e00-\u9fff]{2,4}$",
        "我们?(?:公司|单位|家|学校)(?:在|是|叫|位于)",
        "我(?:的)?(?:老婆|老公|妻子|丈夫|太太|先生|爱人|儿子|女儿|孩子|爸爸|妈妈|父亲|母亲"
        "|老板|经理|领导|同事|助理)(?:叫|是|在|姓)",
    ],
)

_INSTRUCTION = _Rule(
    en=[
        r"\b(?:please|pls|plz|kindly)\b",
        r"\b(?:can|could|would|will) you\b",
        r"\bi (?:want|need|wanna)\b",
        r"\bi(?:'d| would) like\b",
        # Not "I remember that day": narration, not a request.
        r"\bremind me\b|(?<!\bi )(?<!\bwe )\bremember (?:that|this|my)\b|\bdon'?t forget\b",
        r"\blet me know\b|\bnotify me\b",
        r"^(?:book|send|find|search|look up|check|show|get|order|buy|cancel|change|update|reset"
        r"|restart|clear"
        r"|set|schedule|add|remove|delete|create|email|text|call|remind|track|reserve"
        r"|forward|export|print|download|upload|submit|confirm|open|close|turn|switch"
        r"|move|ship|deliver|pay|refund|return|reply|write|draft|translate|list|tell)\b",
        r"\b(?:book|reserve|cancel|reschedule|refund|track) (?:a|an|the|my|me)\b",
        # Questions to the assistant are requests for information ("how are you" and
        # "what's your name" are set aside as chit-chat before these run).
        r"^(?:what|when|where|which|who|whose|how|why)\b",
        r"^(?:is|are|does|do|did|has|have|can|could|will|would|should) (?:my|the|there|it"
        r"|this|that|i|we)\b",
        r"\bwhere(?:'s| is) my\b",
    ],
    zh=[
        "帮我|帮忙|麻烦|请|给我|替我|我(?:要|想|想要|需要|打算)(?!说|聊)",
        "能不能|能否|可不可以|可以帮",
        "订(?!单)|预约|下单|购买|买|(?<![复检调审排核盘])查|搜|找(?:一下|一个)",
        "设置|设定|修改|更改|改(?:成|为|到|一下)|换(?:成|为|到)",
        "取消|退(?:款|货|订)|换货|投诉|报修|提醒我|(?<!我)记得|记住|通知我|重启|重置",
        "发(?:给|送|一份|邮件|短信)|转发|导出|打印|下载|上传|提交|确认",
        "安排|添加|加(?:一个|到)|删除|关闭|打开|开通|升级|续费",
        "把.{1,20}(?:改|换|发|设|加|删|放|寄|送|调)",
        "(?:需要|要求|要)(?:靠近|离|带|有|在|是)",
        "(?:吗|呢|么)$",
        "什么|怎么|怎样|哪(?:里|儿|个|天|家|些)|几(?:点|号|天|个|时)|多少|多久|为什么|是否|有没有",
    ],
)

_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_FACT = _Rule(
    en=[
        r"\bmy [a-z][a-z-]*(?: [a-z-]+)? (?:is|are|was|were|will be|has|have|had|just|got)\b",
        r"\b(?:is|are|was|will be|arrives?|leaves?|departs?|lands?|starts?|ends?|expires?)\b"
        rf".*(?:\d|\b(?:{_WEEKDAYS}|tomorrow|tonight|today|next week|{_MONTHS})\b)",
        r"\b(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? \d{1,2}\b",
        r"\b\d{1,2}(?::\d{2})? ?(?:am|pm)\b",
        r"\b(?:\d+|one|two|three|four|five|six) (?:nights?|days?|weeks?|people|persons|guests"
        r"|adults?|kids|children|rooms?|bags?|euros?|dollars?|usd|rmb|yuan|km|miles|hours?)\b",
        r"\b(?:order|ticket|booking|flight|tracking|account|invoice|case|reference|room|seat"
        r"|gate|confirmation) (?:number |no\.? |id |#)?#?[a-z]*\d",
        r"\b(?:broken|stopped working|doesn'?t work|not working|leaking|lost|hasn'?t arrived"
        r"|never (?:arrived|received|got|came)|arrived damaged|was charged|got charged"
        r"|crash(?:es|ed|ing)?|won'?t (?:start|open|load|turn on))\b",
        r"\b(?:is|are|was) my\b",
        r"\b(?:meeting|appointment|interview|flight|train|trip|deadline|party|dinner|lunch"
        r"|exam|surgery|reservation|delivery|check-?in|check-?out)\b.*\b(?:on|at|by|this"
        r"|next|tomorrow|tonight|today|\d)",
        # Something that happened, is under way or is planned: "I went to a support
        # group yesterday", "we're renovating", "I'll call her tomorrow".
        r"\b(?:i|we)(?: just| finally| recently| also| even| actually| already| first)? (?:went"
        r"|got|made|took|met|saw|ran|won|lost|bought|began|found|gave|had|did|came|became"
        r"|left|wrote|drew|built|sold|spent|taught|learned|learnt|felt|kept|told|heard|paid"
        r"|flew|drove|rode|ate|swam|caught|brought|held|led|sent|quit|set|put|read|grew"
        r"|knew|wore|broke|chose|spoke|sat|stood|fell|fed|was|were|[a-z]{2,}ed)\b",
        r"\b(?:i|we)(?:'ve| have| had)(?: just| finally| recently| also| already| always"
        r"| never)? (?:been|got|gotten|had|done|seen|made|taken|[a-z]{2,}ed)\b",
        r"\b(?:i'm|i am|we're|we are)(?: [a-z]+)? [a-z]{2,}ing\b",
        r"\b(?:i|we)(?: always| often| sometimes| usually| never)? (?:forgot|forget|get|feel)\b",
        r"\b(?:i|we)(?:'ll| will|'m going to| am going to|'re going to| are going to"
        r"| plan to|'m planning to| am planning to| hope to| intend to)\b",
        r"\b(?:i|we) (?:have|own) (?:a|an|two|three|some|my)\b",
        r"\b(?:yesterday|last (?:week|weekend|month|year|night|summer|winter|spring|fall|time"
        rf"|{_WEEKDAYS})|(?:\d+|a|a few|two|three|several|couple of) (?:days?|weeks?|months?"
        r"|years?) ago|next (?:week|weekend|month|year)|this (?:weekend|week|month|year"
        r"|summer)|tomorrow|tonight)\b",
    ],
    zh=[
        "我的.{1,12}(?:是|为|在|有|叫|于)",
        "(?:订单|单号|工单|航班|车次|房间|座位|快递单|运单|发票|合同|账号|会员号|编号)"
        "(?:号|号码|号是|是|为|：|:)?\\s*[a-z]*\\d",
        "\\d{1,4}[年月日号点时]",
        "\\d+(?:元|块|美元|欧元|人|位|个|晚|天|小时|公里|岁|间|张|件|台)",
        "[一二两三四五六七八九十]+(?:个|位|口|晚|天|间|张|件|台|大人|小孩|孩子)|预算",
        "(?:明天|后天|下周|下个月|今晚|周[一二三四五六日天]|星期[一二三四五六日天])"
        ".{0,12}(?:到|出发|起飞|开会|见面|发货|到期|截止|生日|面试|入住|退房|要|是|有)",
        "已经|已(?:付|支付|下单|发货|签收|收到|取消|到|完成)|还没(?:收到|到|发货)",
        "坏了|不制冷|不工作|漏水|故障|出问题|打不开|没反应|丢了|忘(?:记|了)?带|忘(?:记|了).{0,12}了$",
        "(?:昨天|前天|上周|上个?月|去年|前几天|刚才|刚刚|上次)",
        "我们?(?:刚|刚刚|已经|终于)?(?:去|买|看|参加|学|做|开始|完成|养|搬|换|收到|拿到|考|报名"
        "|加入)了",
        "我们?(?:有|养了?)(?:一|两|三|个|只|条|辆|套)",
    ],
)

# Case matters here, so these run on the original text: "I'm Tom" names someone,
# "I'm fine" does not; "Alice works at Acme" states a fact about a named person.
_PROFILE_NAME = re.compile(
    r"\b(?:I'?m|I am|[Tt]his is) [A-Z][a-z]+(?: [A-Z][a-z]+)?\s*$", re.MULTILINE
)
_NAMED_FACT = re.compile(
    r"(?:^|\s)[A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)* (?:is|are|was|were|works|lives|has|owns"
    r"|manages|leads|reports|joined|moved|prefers|likes)\b",
    re.MULTILINE,
)

# --- chit-chat -------------------------------------------------------------------

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

# Separators between clauses. A full stop splits only before a space or the end, so
# "3.5", "No.12" and e-mail addresses stay whole.
_CLAUSE_SPLIT = re.compile(
    r"[,，。!！?？;；~～\n]+|\.+(?=\s|$)|\s+(?:and|but)\s+|然后|另外|还有|顺便"
)
_CONTENT = re.compile(r"[^\W_]")  # letters or digits: not only punctuation and emoji
_STRIP = re.compile(r"^[\W_]+|[\W_]+$")

_KINDS_BY_PRIORITY: tuple[tuple[MemoryType, _Rule, re.Pattern[str] | None, str], ...] = (
    (MemoryType.PREFERENCE, _PREFERENCE, None, "preference"),
    (MemoryType.PROFILE, _PROFILE, _PROFILE_NAME, "profile fact"),
    (MemoryType.INSTRUCTION, _INSTRUCTION, None, "instruction or request"),
    (MemoryType.FACT, _FACT, _NAMED_FACT, "fact"),
)


def _scripts(lower: str) -> tuple[bool, bool]:
    return _HAS_LATIN.search(lower) is not None, _HAS_CJK.search(lower) is not None


def is_stable_preference(text: str, *, remember: bool = True) -> bool:
    """Whether the utterance states a standing default ("always", "默认", "以后都" ...).

    The answer is memoised (process-wide); `remember=False` for text that may hold raw
    PII, which must not outlive the turn in a cache.
    """
    return _is_stable_preference(text) if remember else _stable_preference(text)


def _stable_preference(text: str) -> bool:
    lower = text.lower()
    latin, cjk = _scripts(lower)
    return _STABLE.search(lower, latin=latin, cjk=cjk) and parse_forget_command(text) is None


_is_stable_preference = memoised(_stable_preference)


def is_forget_command(text: str) -> bool:
    """Whether the utterance asks to forget something or to reset the conversation.

    The parser in `reference.policy.forget_commands` decides, here and in `classify`, so
    the filter and the command the forgetting engine acts on never disagree.
    """
    return parse_forget_command(text) is not None


def _chitchat_reason(clause: str) -> str | None:
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


class RuleIntentFilter(IntentFilter):
    """Keeps instructions, preferences, profile facts and stated facts; drops chit-chat.

    The kind follows a priority: a forget command is an instruction; otherwise
    preference > profile > instruction > fact, over all clauses of the utterance.
    """

    def classify(self, text: str) -> IntentDecision:
        # Memoised process-wide: callers classify masked text (`ShortTermStore.add`
        # masks first), so no raw PII is kept.
        return _classify(text)


@memoised
def _classify(text: str) -> IntentDecision:
    """`RuleIntentFilter.classify`, memoised (decisions are frozen, so sharing is safe)."""
    stripped = text.strip()
    if not _CONTENT.search(stripped):
        return IntentDecision(False, None, "chit-chat: punctuation or emoji only")
    if parse_forget_command(stripped) is not None:
        return IntentDecision(True, MemoryType.INSTRUCTION, "forget command")
    clauses = [c for c in (p.strip() for p in _CLAUSE_SPLIT.split(stripped)) if c]
    reasons = [_chitchat_reason(c) for c in clauses]
    content = "\n".join(c for c, r in zip(clauses, reasons, strict=True) if r is None)
    if content:
        lower = content.lower()
        latin, cjk = _scripts(lower)
        for kind, rule, cased, label in _KINDS_BY_PRIORITY:
            if rule.search(lower, latin=latin, cjk=cjk) or (
                cased is not None and latin and cased.search(content)
            ):
                if kind is not MemoryType.INSTRUCTION and is_question(stripped):
                    # "What is my address?" asks for a fact; it does not state one.
                    return IntentDecision(True, MemoryType.INSTRUCTION, "question")
                return IntentDecision(True, kind, label)
    if content:
        # Said to be remembered, or about health and safety: kept whatever its wording.
        if explicit_request(stripped) is not None:
            return IntentDecision(True, MemoryType.FACT, "explicit request to remember")
        if safety_kind(lower) is not None:
            if is_question(stripped):
                return IntentDecision(True, MemoryType.INSTRUCTION, "question")
            return IntentDecision(True, MemoryType.FACT, "health or safety fact")
    named = [r for r in reasons if r and r != "no content"]
    if named:
        return IntentDecision(False, None, f"chit-chat: {named[0]}")
    return IntentDecision(False, None, "chit-chat: no instruction, preference or fact")


_QUESTION = re.compile(
    r"[?？]\s*$"
    r"|^(?:what|where|when|who|whom|which|how|why|is|are|am|do|does|did|can|could|should|"
    r"would|will)\b"
    r"|[吗呢嘛]\s*[?？]?\s*$|什么|哪里|哪儿|哪个|几点|怎么|多少|是否",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether the utterance asks something (English or Chinese) rather than states it."""
    return bool(_QUESTION.search(text.strip()))


# --- explicit requests to remember ----------------------------------------------

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
