"""The words the text rules key on: preference topics, profile attributes, health and
safety, in English and Chinese.

One module for the vocabularies that intent, promotion and forget commands share, so
none of those modules imports another for its words. How a text is matched against
them is `reference.policy.lexicon`. The words that type a memory `sensitive`, `entity`
or `knowledge` are `reference.policy.type_vocabulary`'s; the qualified fields (address,
phone, e-mail) `reference.policy.field_keys`'s.
"""

from __future__ import annotations

from reference.policy.field_keys import field_synonyms

# Preference topics: the key a preference is promoted under, so "I prefer window seats"
# and later "I prefer aisle seats" share `seat`. When a text names several topics, the
# first in this order wins: "my flight seat" is a seat, "tea in the morning" a drink,
# "being contacted by text message" contact.
TOPICS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "shipping",
        (
            "ship",
            "shipping",
            "shipment",
            "deliver*",
            "courier",
            "parcel",
            "express delivery",
            "express shipping",
            "sf express",
            "pickup locker",
            "快递",
            "发货",
            "顺丰",
            "配送",
            "物流",
            "快递柜",
        ),
    ),
    ("seat", ("seat", "aisle", "window seat", "exit row", "座位", "靠窗", "过道", "靠过道")),
    (
        "payment",
        (
            "pay",
            "paying",
            "payment",
            "credit card",
            "debit card",
            "alipay",
            "wechat pay",
            "paypal",
            "apple pay",
            "支付",
            "付款",
            "支付宝",
            "微信支付",
            "信用卡",
        ),
    ),
    (
        "language",
        (
            "language",
            "in english",
            "in chinese",
            "in mandarin",
            "in cantonese",
            "中文",
            "英文",
            "语言",
            "粤语",
            "普通话",
        ),
    ),
    (
        "diet",
        (
            "vegetarian",
            "vegan",
            "spicy",
            "gluten*",
            "halal",
            "kosher",
            "素食",
            "吃素",
            "辣",
            "忌口",
            "清真",
        ),
    ),
    ("contact", ("call me", "email me", "phone call", "contact*", "联系", "电话")),
    (
        "notification",
        (
            "notify",
            "notification",
            "remind me",
            "reminder",
            "text me",
            "text message",
            "sms",
            "通知",
            "提醒",
            "短信",
        ),
    ),
    ("hotel", ("hotel", "hostel", "motel", "hotel room", "酒店", "房间", "宾馆", "民宿")),
    ("airline", ("airline", "flight", "fly with", "航空", "航班")),
    (
        "drink",
        (
            "coffee",
            "tea",
            "latte",
            "americano",
            "espresso",
            "cappuccino",
            "咖啡",
            "茶",
            "拿铁",
            "美式",
            "奶茶",
            "绿茶",
        ),
    ),
    (
        "schedule",
        ("morning", "afternoon", "evening", "weekend", "上午", "下午", "晚上", "周末", "早上"),
    ),
)

# Profile attributes: "my X is Y" / "我的X是Y" keys on the attribute X names. Address,
# phone and e-mail are qualified fields (delivery address, work phone, 收货地址): their
# words and keys are `reference.policy.field_keys`'s.
PROFILE_KEYS: dict[str, tuple[str, ...]] = {
    "address": field_synonyms("address"),
    "company": ("company", "employer", "公司", "单位"),
    "name": ("name", "名字", "姓名"),
    "phone": field_synonyms("phone"),
    "email": field_synonyms("email"),
    "birthday": ("birthday", "date of birth", "生日"),
    "city": ("city", "hometown", "城市"),
    "job": ("job", "occupation", "role", "title", "职位", "工作"),
}

# Health and safety: facts an assistant must not lose (R7 in docs/requirements.md: "我对花生过敏" is
# a fact kept long-term). The key of such a fact starts with one of these names.
SAFETY: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("allergy", ("allerg*", "anaphyla*", "epipen", "过敏")),
    (
        "emergency_contact",
        (
            "emergency contact",
            "in case of emergency",
            "in an emergency",
            "紧急联系人",
            "紧急联络人",
            "紧急情况",
        ),
    ),
    (
        "medication",
        (
            "medication",
            "my medicine",
            "meds",
            "prescription",
            "prescribed",
            "insulin",
            "inhaler",
            "blood thinner",
            "warfarin",
            "metformin",
            "药物",
            "服用",
            "吃药",
            "胰岛素",
            "降压药",
            "处方药",
            "用药",
        ),
    ),
    (
        "condition",
        (
            "wheelchair",
            "deaf",
            "hard of hearing",
            "hearing aid",
            "legally blind",
            "i'm blind",
            "i am blind",
            "visually impaired",
            "disabilit*",
            "disabled",
            "diabet*",
            "asthma*",
            "epilep*",
            "seizures",
            "heart condition",
            "pacemaker",
            "pregnant",
            "轮椅",
            "耳聋",
            "听力障碍",
            "助听器",
            "失明",
            "视力障碍",
            "残疾",
            "残障",
            "糖尿病",
            "哮喘",
            "癫痫",
            "心脏病",
            "起搏器",
            "怀孕",
            "孕期",
        ),
    ),
)

# Compounds that contain a lexicon word without meaning it, and words whose boundary
# would otherwise be misread: segmentation takes the longest word at each position.
ZH_COMPOUNDS = (
    "茶几",
    "茶叶蛋",
    "编程语言",
    "肢体语言",
    "不过",
    "敏感",
    "房间号",
    "辣妈",
    "火辣",
    "毒辣",
    "美式足球",
    "发货单",
    "联系人",
    "电话会议",
    # "病" and "药" alone are health (`SENSITIVE`), not in these.
    "毛病",
    "病毒",
    "语病",
    "通病",
    "弊病",
    "病句",
    "药店",
    "药房",
    "火药",
    "弹药",
    "农药",
    "炸药",
)
