"""The English and Chinese patterns of forget commands (`reference.policy.forget_commands`).

Each verb pattern matches one clause, anchored at its start after optional politeness;
the object it captures (`obj`) is classified by the parser.
"""

from __future__ import annotations

import re

# --- English ------------------------------------------------------------------------

EN_LEAD = (
    r"(?:(?:please|pls|plz|kindly|just|now|ok|okay|so|and|also|then|hey|hi|hello|oh|well"
    r"|actually|alright|thanks|thank you|one more thing|but|yes|yeah|sure)\s+)*"
)
EN_ASK_YOU = (
    r"(?:(?:can|could|would|will) you\s+(?:please\s+)?(?:just\s+)?"
    r"|i (?:want|need|would like|'d like) you to\s+|i'd like you to\s+"
    r"|you (?:can|should|must|may|need to)\s+(?:now\s+)?|(?:please\s+)?go ahead and\s+"
    r"|make sure (?:you|to)\s+)"
)
# The user acting on their own data: "I want to delete my data", "let's start over". Not
# for "forget": "I want to forget about him" is a feeling, not an instruction.
EN_ASK_SELF = (
    r"(?:i (?:want|need|would like|'d like) to\s+|i'd like to\s+|let'?s\s+|let us\s+"
    r"|(?:can|could|shall) we\s+|we (?:can|should)\s+)"
)
EN_ACT = rf"^{EN_LEAD}(?:{EN_ASK_YOU}|{EN_ASK_SELF})?{EN_LEAD}"
EN_FORGET = re.compile(rf"^{EN_LEAD}{EN_ASK_YOU}?{EN_LEAD}forget(?:\s+about)?\s+(?P<obj>.+)$")
EN_DELETE = re.compile(
    rf"{EN_ACT}(?:delete|erase|remove|wipe|clear|purge|scrub|drop)\s+(?:out\s+|away\s+)?"
    r"(?P<obj>.+)$"
)
EN_UNSTORE = re.compile(
    rf"^{EN_LEAD}{EN_ASK_YOU}?(?:please\s+)?(?:don't|dont|do not|stop|no longer|never again)"
    r"\s+(?:remember(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|keep(?:ing)?|record(?:ing)?"
    r"|log(?:ging)?|track(?:ing)?|memori[sz](?:e|ing))\s+(?P<obj>.+)$"
)
EN_RESET = re.compile(rf"{EN_ACT}(?:reset|restart|refresh|reboot)\s+(?P<obj>.+)$")
EN_START_OVER = re.compile(
    rf"{EN_ACT}(?:start|begin)\s+(?:over|afresh"
    r"|anew|again|from scratch|(?:a\s+)?(?:new|fresh)\s+(?:conversation|chat|session))"
    r"(?:\s+(?:please|from the (?:beginning|start)|with a clean slate))*$"
)
EN_TAIL = re.compile(
    r"\s+(?:please|now|right now|for me|for good|permanently|completely|entirely|forever"
    r"|too|as well|thanks|thank you|immediately|at once|right away|altogether)$"
)
EN_MEMORY_TAIL = re.compile(
    r"\s+(?:from|in|out of|off)\s+(?:your\s+|the\s+|my\s+)?(?:memory|memories|records?"
    r"|database|system|storage|brain|mind|files?|notes)$"
)
EN_HELD_TAIL = re.compile(
    r"\s+(?:(?:that|which)\s+)?(?:you(?:'ve| have)?\s+(?:got|have|know|stored|saved|kept"
    r"|remember(?:ed)?|recorded|learned|learnt)|i(?:'ve| have)?\s+(?:gave|given|told|sent"
    r"|shared(?: with)?|provided|mentioned(?: to)?)\s+you)(?:\s+(?:about|on|of)\s+me)?$"
)
EN_SESSION = re.compile(
    r"\b(?:(?:this|the|our|current|today's|that)\s+(?:conversation|chat|session|context"
    r"|thread|dialog(?:ue)?)s?|(?:chat|conversation) history|what we (?:talked about|discussed"
    r"|said|covered)|(?:said|told you|discussed|talked about|wrote)\s+(?:today|so far"
    r"|in (?:this|our) (?:conversation|chat)))\b|^(?:conversations?|chats?|sessions?|context)$"
)
EN_EVERYTHING = re.compile(
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
EN_BACK = re.compile(
    r"it|this|that|these|those|this one|that one|(?:that|this) (?:part|bit|message)"
    r"|all (?:of )?(?:this|that)|the last (?:message|one|thing(?: i said)?|part)"
    r"|my last (?:message|sentence)|(?:the )?(?:previous|last) message"
    r"|what i (?:just )?(?:said|wrote|typed|told you|mentioned|sent)"
    r"(?: (?:just now|earlier|before|above|a moment ago|last))?"
)
EN_SAID_PREFIX = re.compile(
    r"^(?:what|everything|anything|all(?: that)?|the (?:stuff|things?|bits?|parts?))\s+"
    r"(?:that\s+)?(?:i(?:'ve| have)?|you)\s+(?:said|told you|mentioned|wrote|shared|gave you"
    r"|typed|know|have|stored|saved|remember)\s+"
)
EN_ABOUT_PREFIX = re.compile(
    r"^(?:(?:everything|anything|all|the (?:stuff|things?|info|information|details|data"
    r"|parts?|bits?))\s+(?:about|regarding|concerning|related to|on)|about|regarding"
    r"|concerning)\s+"
)
EN_DETERMINER = re.compile(r"^(?:my|the|your|our|all(?: of)?|any|that|this|those|these)\s+")
# "Forget" with these is no erasing: failing to do something, or letting go of it.
EN_NOT_ERASING = re.compile(
    r"(?:to|how to|how (?:it|that|this|things) (?:went|was|felt|goes)|what happened|whether"
    r"|if)\b"
)
NOT_DATA = re.compile(
    r"(?:(?:all |about )?(?:my|your|our|the|his|her|their) )?(?:troubles?|worries|worry"
    r"|problems?|pain|past|stress|fears?|sorrows?|regrets?|mistakes?|ex|him|her|them|he|she"
    r"|they|you|yourself|myself|us|everyone|everybody|the world|time|it all|bad (?:times"
    r"|days|memories)|rest|bad stuff|day|week)"
    r"|(?:我的|我)?(?:烦恼|忧愁|痛苦|不愉快的?事?|不开心的?事?|过去|伤心事|伤心|难过的事|压力"
    r"|悲伤|不快|他|她|他们|她们|你|自己|时间)"
)
# "my worries for a while": the head of a topic, before a clause or an aside.
TOPIC_HEAD = re.compile(r"\s+(?:for|and|so|while|because|until|when|or)\s+")
EN_PERSONAL = re.compile(
    r"\b(?:id|identity|passport|card|credit card|bank|account number|ssn|social security"
    r"|location|contact|personal|private|preferences?|profile|details|info|information)\b"
)

# --- Chinese ------------------------------------------------------------------------

ZH_MEMORY = "从(?:你的)?(?:记忆|记录|系统|数据库|脑子)(?:里|中)?(?:面)?"
ZH_LEAD = (
    r"(?:(?:好的|好吧|好|那么|那|嗯|喂|你好|您好|谢谢|另外|还有|然后|现在|麻烦(?:你|您)?|劳驾"
    r"|请(?:你|您)?|帮(?:我|忙)|替我|给我|你|您|可以|能|能不能|可不可以|能否|是否可以|可否"
    rf"|我(?:想|要|希望|需要)(?:让|请)?(?:你|您)|直接|马上|立刻|立即|就|再|都|全都|彻底|永久"
    rf"|完全|一下|{ZH_MEMORY})\s*)*"
)
ZH_ASK_SELF = r"(?:我(?:想|要|希望|需要|申请)|我们|咱们|让我们)?"
ZH_FORGET = re.compile(rf"^(?P<lead>{ZH_LEAD})(?:忘记|忘掉|忘却)(?P<obj>.+)$")
ZH_DELETE = re.compile(
    rf"^(?P<lead>{ZH_LEAD}{ZH_ASK_SELF}{ZH_LEAD})(?:删除|删掉|删了|删去|清除|清空|清掉|清理"
    r"|抹掉|抹去|抹除|去掉|移除|销毁)(?:一下)?(?P<obj>.+)$"
)
ZH_UNSTORE = re.compile(
    rf"^(?P<lead>{ZH_LEAD})(?:不要|别|不用|无需|请勿|勿|不许|不准|不可以)再?(?:帮我)?"
    r"(?:记住|记录|记下|记|保存|存储|储存|存下|存|留存|保留)(?:下来|下)?(?P<obj>.*)$"
)
ZH_BA = re.compile(
    rf"^(?P<lead>{ZH_LEAD}{ZH_ASK_SELF}{ZH_LEAD})把(?P<obj>.+?)(?P<mem>{ZH_MEMORY})?"
    r"(?:给我|都|全部|全都|彻底|永久)*(?P<verb>忘掉|忘记|忘了|忘|删掉|删除|删了|删|清除|清空"
    r"|清掉|抹掉|抹去|去掉|移除)(?:掉|了|吧|啊|呀|哦)*$"
)
ZH_RESET = re.compile(
    rf"^(?P<lead>{ZH_LEAD}{ZH_ASK_SELF}{ZH_LEAD})(?P<verb>重置|重新开始|重启|重开|刷新)"
    r"(?:一下)?(?P<obj>.*)$"
)
ZH_NEW = re.compile(
    rf"^{ZH_LEAD}{ZH_ASK_SELF}{ZH_LEAD}(?:开始|开启|开|换)(?:一个|一段|个)?新(?:的)?"
    r"(?:对话|会话|聊天)(?:吧)?$"
)
ZH_TAIL = re.compile(r"(?:吧|啊|呀|哦|哈|嘛|好吗|好不好|可以吗|行吗|行不行|谢谢|谢啦|一下)+$")
ZH_MODAL = re.compile("能|可以|可不可以|能不能|能否|可否")
ZH_REQUEST = re.compile("请|帮|麻烦|劳驾|你|您")
ZH_QUESTION = re.compile("怎么|怎样|如何|为什么|为啥|咋|什么|哪|吗|呢")
ZH_SESSION = re.compile(
    r"(?:(?:这次|本次|当前|这个|这段|这轮|我们的?|咱们的?|刚才的?|之前的?|今天的?|所有的?"
    r"|全部的?)的?)?(?:对话|会话|聊天)(?:记录|内容|历史|上下文)?|上下文"
    r"|(?:我们|咱们)?(?:刚才|今天|之前)?(?:聊|谈)(?:过)?的(?:内容|东西|事情?|话)?"
)
ZH_EVERYTHING = re.compile(
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
ZH_BACK = re.compile(
    r"(?:这|那)(?:个|条|些|件事|句话?|段话?|部分|条(?:信息|记录|消息))?|它"
    r"|我?(?:刚才|刚刚|上面|之前|前面|上一条)我?(?:说|讲|发|提|写)?(?:的|过的)?"
    r"(?:话|那句话?|这句话?|那条|这条|内容|消息|信息|记录)?"
)
ZH_PREFIX = re.compile(
    r"^(?:我(?:刚才|刚刚|之前|以前|上次)?(?:说|讲|提|告诉你|给你|发|写)(?:过)?的"
    r"|(?:你|您)(?:知道|记得|记住|保存|存)(?:的)?|关于(?:我的?)?|有关(?:我的?)?|我的|这个|那个"
    r"|这条|那条|所有的?|全部的?)"
)
ZH_SUFFIX = re.compile(r"的?(?:事情?|信息|内容|记录|资料|数据|一切|所有|东西|部分|那些|这些)$")
# "忘记" needs a possessive or a pointer after it: "忘记密码" is the forgotten-password
# button, "忘记我的密码" and "忘记这个" are commands.
ZH_FORGET_OBJECT = re.compile(
    r"^(?:我|关于|有关|所有|全部|一切|这|那|刚|之前|以前|上面|前面|你知道|你记得|它)"
)
ZH_PERSONAL = re.compile(
    "身份证|护照|银行卡|卡号|信用卡|账号|位置|定位|联系方式|个人|隐私|偏好|喜好|资料|信息"
)
REFERS_TO_MESSAGE = re.compile("条|句|话|消息|信息|记录|说|message|said|wrote|typed|told|sent")
