"""The words that type a memory `sensitive`, `entity` or `knowledge`, in English and
Chinese (`reference.policy.memory_types` applies them). Matched as the lexicon matches
(`reference.policy.lexicon`): English whole words, `*` a stem; Chinese by segmentation.
"""

from __future__ import annotations

# Sensitive disclosures (`reference.policy.memory_types`): an utterance naming one is
# typed `sensitive`, whose TTL strategies keep short. Health besides the `SAFETY` kinds
# allergy, medication and condition; identity documents and credentials; money. The
# reference's PII detector adds identity and financial numbers (`SENSITIVE_PII_KINDS`).
SENSITIVE: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "health",
        (
            "diagnos*",
            "blood pressure",
            "cholesterol",
            "cancer",
            "tumor",
            "tumour",
            "chemo*",
            "depression",
            "anxiety disorder",
            "hiv",
            "medical record*",
            "my doctor said",
            "surgery",
            "确诊",
            "诊断",
            "病历",
            "高血压",
            "抑郁症",
            "焦虑症",
            "癌",
            "肿瘤",
            "化疗",
            "住院",
            "手术",
            "病",
            "药",
        ),
    ),
    (
        "identity",
        (
            "passport",
            "id number",
            "id card",
            "identity card",
            "social security",
            "ssn",
            "driver's license",
            "driving licence",
            "driver license",
            "national insurance number",
            "password",
            "passcode",
            "pin code",
            "身份证",
            "护照",
            "驾照",
            "驾驶证",
            "社保号",
            "密码",
            "验证码",
        ),
    ),
    (
        "financial",
        (
            "salary",
            "my income",
            "i earn",
            "debt*",
            "loan",
            "mortgage",
            "bank account",
            "account number",
            "card number",
            "bank card number",
            "credit score",
            "工资",
            "薪水",
            "月薪",
            "年薪",
            "收入",
            "银行卡号",
            "卡号",
            "银行账户",
            "欠款",
            "贷款",
            "房贷",
            "负债",
            "存款",
        ),
    ),
)
# What the reference's PII detector finds (`reference.pii`), as a sensitive kind; a
# detector kind not listed (a phone number, an e-mail: contact details) is not one.
SENSITIVE_PII_KINDS: dict[str, str] = {
    "cn_id": "identity",
    "passport": "identity",
    "ssn": "identity",
    "us_ssn": "identity",
    "national_id": "identity",
    "bank_card": "financial",
    "iban": "financial",
}

# Named entities (`memory_types`): "my dentist is Dr. Lee", "我的经理叫王伟", "my dog Max".
# A role the user names someone or something by; the role is the key, so a later name
# for the same role supersedes the earlier one, in either language.
ENTITY_ROLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("dentist", ("dentist", "牙医")),
    ("doctor", ("doctor", "gp", "physician", "医生", "大夫", "主治医生")),
    ("manager", ("manager", "boss", "supervisor", "line manager", "经理", "老板", "领导", "上司")),
    ("lawyer", ("lawyer", "attorney", "律师")),
    ("accountant", ("accountant", "会计")),
    ("landlord", ("landlord", "landlady", "房东")),
    ("teacher", ("teacher", "tutor", "老师")),
    ("assistant", ("assistant", "secretary", "助理", "秘书")),
    ("colleague", ("colleague", "coworker", "co-worker", "同事")),
    (
        "partner",
        (
            "partner",
            "wife",
            "husband",
            "spouse",
            "girlfriend",
            "boyfriend",
            "老婆",
            "老公",
            "妻子",
            "丈夫",
            "太太",
            "爱人",
            "女朋友",
            "男朋友",
        ),
    ),
    ("son", ("son", "儿子")),
    ("daughter", ("daughter", "女儿")),
    ("dog", ("dog", "puppy", "狗", "小狗", "狗狗")),
    ("cat", ("cat", "kitten", "猫", "小猫", "猫咪")),
)

# Stated knowledge (`memory_types`): "our return policy is 30 days", "the API rate limit
# is 100 per minute", "公司的退货政策是30天". The subject of "the/our X is Y" ends in one
# of these nouns; the subject is the key a `knowledge_updated` event names.
KNOWLEDGE_NOUNS: tuple[str, ...] = (
    "policy",
    "policies",
    "limit",
    "rate limit",
    "quota",
    "process",
    "procedure",
    "rule",
    "rules",
    "sla",
    "opening hours",
    "business hours",
    "standard",
    "guideline",
    "guidelines",
    "政策",
    "流程",
    "规定",
    "制度",
    "标准",
    "限额",
    "上限",
    "规则",
    "营业时间",
    "时限",
)
