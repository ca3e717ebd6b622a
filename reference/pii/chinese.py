"""Chinese person names and addresses, from jieba's part-of-speech tags plus patterns.

jieba (`posseg`, HMM on) tags person names `nr` and places `ns`. A person name is an `nr`
word of 2-4 characters (or a surname and given name jieba split into two `nr` words)
whose first character or two are a common surname, not followed by a title word; a name
after "我叫" / "我的名字是" / "联系人" counts even when jieba misses it. An address is a
run of place words, street words (...路/街/大道/巷), numbers and building units
(号/栋/单元/室/楼 ...) holding a street or estate word and a number.

jieba loads its dictionary on first use (about 1.5 s); `_tokenizer` does it once per
process, with its cache file in the temp directory (never in the repository) and its
logging silenced.
"""

from __future__ import annotations

import re

from reference.chinese_words import segmenter, tagger

# The ~120 most common surnames (百家姓 by population, 2020 census order) and compound ones.
_SURNAMES = frozenset(
    "王李张刘陈杨黄赵吴周徐孙马朱胡郭何林高罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘蔡蒋余于杜叶程"
    "魏苏吕丁任沈姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛"
    "郝龚邵万钱严覃武戴莫孔向汤常温康施文牛樊葛邢安齐易乔伍庞颜倪庄聂章鲁岳翟殷詹申欧耿关兰"
    "焦俞左柳甘祝包宁尚符舒阮柯纪梅童凌毕单季裴霍涂成苗谷盛曲翁冉骆蓝路游辛靳管柴蒙鲍华喻祁"
)
_COMPOUND_SURNAMES = ("欧阳", "司马", "上官", "诸葛", "东方", "皇甫", "慕容", "令狐", "夏侯")
_TITLES = ("先生", "女士", "小姐", "老师", "经理", "总", "师傅", "医生", "阿姨", "叔叔", "同学")
# Last characters of place names jieba tags as people (王府井, 李家村), rare in given names.
_PLACE_TAILS = frozenset("井桥门湖街路园村城寺庙府宫庄店楼区市省县镇")
_DEMONSTRATIVES = frozenset("这那一两几每哪某该")
_COMMON_WORD_FREQ = 1_000
_CUE_RE = re.compile(
    r"(?:我叫|我的名字是|我的名字叫|名字叫|联系人[:：]?|收件人[:：]?|姓名[:：]?)\s*"
)
_CJK_NAME_RE = re.compile(r"[\u4e00-\u9fff]{2,4}")

_STREET_ENDS = ("路", "街", "大道", "道", "巷", "弄", "胡同", "里")
_ESTATE_ENDS = ("小区", "花园", "大厦", "公寓", "新村", "家园", "苑", "广场", "中心")
_ADMIN_ENDS = ("省", "自治区", "市", "区", "县", "镇", "乡", "村", "街道")
_UNIT_WORDS = frozenset(
    ("号", "栋", "幢", "单元", "室", "楼", "层", "号楼", "号院", "座", "期", "-", "#")
)
_UNIT_ENDS = ("号", "栋", "幢", "单元", "室", "号楼", "号院", "层", "段", "座")
_NUMERALS = frozenset("一二三四五六七八九十百零两")
_NOT_PLACE_FLAGS = ("v", "d", "r", "c", "p", "u", "y", "e", "o", "t", "m", "q")
_DIGITS_RE = re.compile(r"\d+", re.ASCII)
_ADMIN_PREFIX_RE = re.compile(r"^(?:[\u4e00-\u9fff]{1,7}?(?:自治区|省|市|新区|区|县))+")


def has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def find_names_and_addresses(norm: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(name spans, address spans) in `norm`, a text holding Chinese characters."""
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    for pair in tagger().cut(norm):
        tokens.append((pair.word, pair.flag, pos))
        pos += len(pair.word)
    return _names(norm, tokens), _addresses(tokens)


def _is_surname_led(word: str) -> bool:
    return word[0] in _SURNAMES or word.startswith(_COMPOUND_SURNAMES)


def _names(norm: str, tokens: list[tuple[str, str, int]]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens):
        word, flag, start = tokens[i]
        first = i
        nxt = tokens[i + 1] if i + 1 < len(tokens) else ("", "", 0)
        if (
            len(word) == 1
            and word in _SURNAMES
            and (nxt[1].startswith("nr") and 1 <= len(nxt[0]) <= 2)
        ):
            word, flag, i = word + nxt[0], "nr", i + 1  # 刘 / 秀英, 林 / 志强: split by jieba
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ("", "", 0)
        elif flag == "ns" and word.startswith(_COMPOUND_SURNAMES) and nxt[1].startswith("nr"):
            word, i = word + nxt[0], i + 1  # 欧阳 / 娜娜
            nxt = tokens[i + 1] if i + 1 < len(tokens) else ("", "", 0)
        is_name = flag.startswith("nr") or word.startswith(_COMPOUND_SURNAMES)
        before = tokens[first - 1][0] if first else ""
        titled = word.endswith(_TITLES) or nxt[0].startswith(_TITLES)
        if is_name and not titled and _is_person(word, before):
            found.append((start, start + len(word)))
        i += 1
    for cue in _CUE_RE.finditer(norm):
        m = _CJK_NAME_RE.match(norm, cue.end())
        if m is None or any(a <= m.start() < b for a, b in found):
            continue
        end = m.start() + _cued_name_len(m.group(), tokens, m.start())
        surname = 2 if m.group().startswith(_COMPOUND_SURNAMES) else 1
        if end - m.start() > surname:
            found.append((m.start(), end))
    return found


def _is_person(word: str, before: str) -> bool:
    """Whether an `nr` word is a person's name and not a common word or a measure word."""
    surname = 2 if word.startswith(_COMPOUND_SURNAMES) else 1
    if not (2 <= len(word) <= 4 and _is_surname_led(word)) or word[-1] in _PLACE_TAILS:
        return False
    if len(word) <= surname:
        return False  # a surname alone (欧阳) is not a name, and its mask would be itself
    if before[-1:] in _DEMONSTRATIVES or before[-1:].isdigit():
        return False  # 这张卡, 一张纸: 张 is a measure word there
    # Very frequent dictionary words tagged `nr` are mostly ordinary words (谢谢, 安静).
    return (_frequency(word) or 0) < _COMMON_WORD_FREQ


def _frequency(word: str) -> int | None:
    return segmenter().FREQ.get(word)


def _cued_name_len(chars: str, tokens: list[tuple[str, str, int]], start: int) -> int:
    """Length of the name after a cue: jieba's word there if 2-4 long, else 3 (or 2)."""
    for word, _flag, pos in tokens:
        if pos == start and 2 <= len(word) <= 4:
            return len(word)
    return min(len(chars), 3 if len(chars) >= 3 and chars[0] in _SURNAMES else 2)


def _is_address_word(word: str, flag: str) -> bool:
    if word.isascii() and word.isdigit():
        return True
    if word in _UNIT_WORDS or (flag == "m" and all(ch in _NUMERALS for ch in word)):
        return True
    if flag.startswith(_NOT_PLACE_FLAGS) and flag not in ("m",):
        return False
    return flag == "ns" or word.endswith(_STREET_ENDS + _ESTATE_ENDS + _ADMIN_ENDS + _UNIT_ENDS)


def _addresses(tokens: list[tuple[str, str, int]]) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    i = 0
    while i < len(tokens):
        j = i
        while j < len(tokens) and (
            _is_address_word(tokens[j][0], tokens[j][1])
            or _street_name_part(tokens, j, inside=j > i)
        ):
            j += 1
        run = tokens[i:j]
        if run and _is_address(run):
            while run and not _is_address_start(run[0]):
                run = run[1:]
            while run and run[-1][0].isdigit():
                run = run[:-1]
            start = run[0][2]
            found.append((start, run[-1][2] + len(run[-1][0])))
        i = max(j, i + 1)
    return found


def _street_name_part(tokens: list[tuple[str, str, int]], j: int, *, inside: bool) -> bool:
    """A plain word before a street or estate word: 体育 / 西路, 阳光 / 花园, 解放碑 / 八 / 一路.

    Inside a run of address words any word can name a street (解放 / 大道); before one,
    verbs and function words cannot (寄到 / 中山路).
    """
    word, flag = tokens[j][0], tokens[j][1]
    if not ("\u4e00" <= word[0] <= "\u9fff") or len(word) > 4:
        return False
    if not inside and flag in ("v", "vd", "r", "p", "u", "c", "d", "uj", "ul", "ud"):
        return False
    ahead = [w for w, f, _p in tokens[j + 1 : j + 3]]
    if ahead and ahead[0].endswith(_STREET_ENDS + _ESTATE_ENDS):
        return True
    return (
        len(ahead) == 2
        and all(ch in _NUMERALS for ch in ahead[0])
        and ahead[1].endswith(_STREET_ENDS)
    )


def _is_address(run: list[tuple[str, str, int]]) -> bool:
    words = [w for w, _f, _p in run]
    has_number = any(w.isascii() and w.isdigit() for w in words) or any(
        _DIGITS_RE.search(w) for w in words
    )
    has_street = any(w.endswith(_STREET_ENDS + _ESTATE_ENDS) for w in words)
    has_unit = any(w.endswith(_UNIT_ENDS) or w in _UNIT_WORDS for w in words)
    return has_number and has_street and has_unit


def _is_address_start(token: tuple[str, str, int]) -> bool:
    word = token[0]
    return not (word in _UNIT_WORDS or (word.isascii() and not word.isalnum()))


def mask_address(value: str) -> str:
    """Keep the region (省/市/区/县) in front, mask the rest: `北京市海淀区*******`."""
    m = _ADMIN_PREFIX_RE.match(value)
    keep = m.end() if m and m.end() < len(value) - 1 else 0
    return value[:keep] + "".join("*" if not ch.isspace() else ch for ch in value[keep:])


def mask_name(value: str) -> str:
    """The surname (or the first letter) and two stars: `王**`, `J**`."""
    first = 2 if value.startswith(_COMPOUND_SURNAMES) else 1
    return value[:first] + "**"
