"""The patterns that make an utterance worth keeping, by memory kind (`reference.policy.intent`).

Preference, profile, instruction and fact, in English and Chinese, each run on
lowercased text; two cased patterns run on the original text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from reference.models import MemoryType


class KindRule:
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


# --- kept utterances -------------------------------------------------------------

STABLE_EN = [
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
STABLE_ZH = [
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
STABLE = KindRule(STABLE_EN, STABLE_ZH)

# Habits: a routine the user states about themself, in any words ("every morning I
# drink an Americano", "我一般坐地铁上班"): first person and a frequency, "only" or a
# commute. They are preferences for the assistant's purposes (what to suggest, book,
# order), kept as preferences; tests/data/habits.yaml holds the labelled set they are
# measured on.
_PERIODS = (
    "morning|afternoon|evening|night|day|week|weekend|weekday|month|year"
    "|monday|tuesday|wednesday|thursday|friday|saturday|sunday"
)
HABIT_EN = [
    r"\bi (?:usually|normally|typically|generally|mostly|often|regularly|tend to|rarely"
    r"|seldom)\b",
    rf"\bi (?:\S+ ){{1,8}}?(?:every|each) (?:{_PERIODS})\b",
    rf"^(?:(?:every|each|on|most) )?(?:{_PERIODS})s?,? i\b",
    rf"\bi (?:\S+ ){{1,8}}?most (?:{_PERIODS})s\b",
    r"\bi (?:\S+ ){1,8}?(?:once|twice|\w+ times) (?:a|per|every) (?:day|week|month|year)\b",
    r"\bi only (?:eat|drink|fly|take|use|book|stay|buy|wear|order|shop|go)\b",
    r"\bi (?:take|ride|drive|cycle|bike|walk|commute)\b.{0,30}\bto (?:work|school|the office)\b",
    r"\bi (?:get|arrive|am|go) (?:\S+ ){0,4}?(?:\w+ )?(?:hours?|minutes?) early\b",
]
HABIT_ZH = [
    "我.{0,6}(?:一般|通常|平时|经常|常常|往往|向来)(?!般)",
    "我每(?:天|日|晚|早|周|星期|个?月|年)",
    "每(?:天|日|晚|早|周|星期.|个?月|年|次).{0,8}都",
    "我.{0,6}都(?:会|要|选|坐|住|喝|吃|用|去|订|买|点|打|走|带)",
    "我.{0,6}只(?:吃|喝|坐|住|用|买|订|穿|看|选)",
    "从(?:来)?不(?!错)",
]
#: Checked after the kinds and after health and safety (a medication taken every
#: morning stays a health fact), before the utterance would be dropped.
HABIT = KindRule(HABIT_EN, HABIT_ZH)

PREFERENCE = KindRule(
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
        *STABLE_EN,
    ],
    zh=[
        "喜欢|爱(?:吃|喝|用|看)|偏好|偏爱|倾向于?|习惯(?:用|于|了)?|更想|宁愿|(?:最|比较|更)爱",
        "讨厌|受不了|不吃|不喝|忌口|过敏|吃素|最好(?:是|用|都)",
        *STABLE_ZH,
    ],
)

PROFILE = KindRule(
    en=[
        # "my new address is", "my current phone number is": a restated profile value.
        r"\bmy (?:(?:new|current|updated|latest|present|correct) )?(?:home |work |office "
        r"|shipping |delivery |billing |mailing )?address\b",
        r"\bmy (?:full |first |last )?name is\b",
        # The phone or e-mail as a value, not the device: "I dropped my phone" is no profile.
        r"\bmy (?:(?:new|current|updated|latest|present|correct) )?(?:(?:home|work|office"
        r"|business|personal|private|mobile|cell) )?(?:(?:phone|mobile|cell|telephone)"
        r"(?: number)?|number|landline|e-?mail(?: address)?) (?:is|was|=|:|has changed|changed)",
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
        "我的?(?:家庭|家里|工作|办公|公司|单位|个人|私人)?(?:电话|手机号?|座机|邮箱)(?:号码?)?(?:是|为|：|:)",
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

INSTRUCTION = KindRule(
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
FACT = KindRule(
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
PROFILE_NAME = re.compile(
    r"\b(?:I'?m|I am|[Tt]his is) [A-Z][a-z]+(?: [A-Z][a-z]+)?\s*$", re.MULTILINE
)
NAMED_FACT = re.compile(
    r"(?:^|\s)[A-Z][a-zA-Z]+(?: [A-Z][a-zA-Z]+)* (?:is|are|was|were|works|lives|has|owns"
    r"|manages|leads|reports|joined|moved|prefers|likes)\b",
    re.MULTILINE,
)

KINDS_BY_PRIORITY: tuple[tuple[MemoryType, KindRule, re.Pattern[str] | None, str], ...] = (
    (MemoryType.PREFERENCE, PREFERENCE, None, "preference"),
    (MemoryType.PROFILE, PROFILE, PROFILE_NAME, "profile fact"),
    (MemoryType.INSTRUCTION, INSTRUCTION, None, "instruction or request"),
    (MemoryType.FACT, FACT, NAMED_FACT, "fact"),
)
