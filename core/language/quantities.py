"""Numbers and their units, read from the text a sub-answer gave.

Read conservatively: plain digits with thousands commas and decimals ("1,200", "3.5", "-2"),
full-width digits, a Chinese magnitude right after digits ("1.5万"), and simple Chinese
numerals ("十二", "两千零五"). Latin suffixes such as "3.5k" are not expanded: a wrong multiplier
is worse than no number, and a step without a number fails, so the pipeline falls through to
dual-level retrieval.

A unit is kept when it is a known one (bytes, length, mass, time, frequency, percent), so that
"1,200 MB" is not taken as larger than "4 GB". Values in known units of one dimension are
converted to the first one's unit; values whose units do not convert, or a mix of several
units with unit-less values (which unit did those mean?), cannot be compared and fail the step.
Any other word after a number ("64 GPUs") is a noun, not a unit, and is ignored.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

# Digits not glued to a Latin word ("H2O", "v2", "Zhefu-802" name things; they are not values).
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.,\-])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?!\d)")
_CN_MAGNITUDES = {"十": 10, "百": 100, "千": 1000, "万": 10_000, "亿": 100_000_000}
_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_UNITS = {"十": 10, "百": 100, "千": 1000}
_CN_RUN = re.compile(r"[零〇一二两三四五六七八九十百千万亿]+")
# A lone Chinese digit is a number only before a measure word ("五个", "三种"), not in "统一".
_CN_MEASURE = "个种名位次年月天日条项家人只件株米克斤元倍度岁秒台块"

# canonical unit → (dimension, factor to the dimension's base unit)
_UNITS: dict[str, tuple[str, float]] = {
    "B": ("bytes", 1),
    "KB": ("bytes", 1e3),
    "MB": ("bytes", 1e6),
    "GB": ("bytes", 1e9),
    "TB": ("bytes", 1e12),
    "KiB": ("bytes", 2**10),
    "MiB": ("bytes", 2**20),
    "GiB": ("bytes", 2**30),
    "TiB": ("bytes", 2**40),
    "mm": ("length", 1e-3),
    "cm": ("length", 1e-2),
    "m": ("length", 1),
    "km": ("length", 1e3),
    "mg": ("mass", 1e-3),
    "g": ("mass", 1),
    "kg": ("mass", 1e3),
    "t": ("mass", 1e6),
    "斤": ("mass", 500),
    "ms": ("time", 1e-3),
    "s": ("time", 1),
    "min": ("time", 60),
    "h": ("time", 3600),
    "d": ("time", 86400),
    "Hz": ("frequency", 1),
    "kHz": ("frequency", 1e3),
    "MHz": ("frequency", 1e6),
    "GHz": ("frequency", 1e9),
    "%": ("percent", 1),
}
_ALIASES = {
    **{u.casefold(): u for u in _UNITS},
    "byte": "B",
    "bytes": "B",
    # Kubernetes writes binary sizes without the B ("512Mi", "2Gi"), and so do teams' docs
    # that copy its manifests; a model quoting them as written must still compare.
    "ki": "KiB",
    "mi": "MiB",
    "gi": "GiB",
    "ti": "TiB",
    "m": "m",  # not "M" (mega) — lengths are the likelier reading after casefold
    "meter": "m",
    "meters": "m",
    "metre": "m",
    "metres": "m",
    "毫米": "mm",
    "厘米": "cm",
    "米": "m",
    "公里": "km",
    "千米": "km",
    "毫克": "mg",
    "克": "g",
    "千克": "kg",
    "公斤": "kg",
    "吨": "t",
    "sec": "s",
    "secs": "s",
    "second": "s",
    "seconds": "s",
    "毫秒": "ms",
    "秒": "s",
    "mins": "min",
    "minute": "min",
    "minutes": "min",
    "分钟": "min",
    "hr": "h",
    "hrs": "h",
    "hour": "h",
    "hours": "h",
    "小时": "h",
    "day": "d",
    "days": "d",
    "天": "d",
    "percent": "%",
}
_UNIT_AFTER = re.compile(
    r"\s*(%|毫米|厘米|公里|千米|米|毫克|千克|公斤|克|斤|吨|毫秒|秒|分钟|小时|天|[A-Za-z]+\b)"
)


@dataclass(frozen=True, slots=True)
class Quantity:
    value: float
    unit: str = ""  # a canonical known unit, or "" (none, or a word that is not a unit)


class UnitMismatch(ValueError):
    """Values whose units cannot be brought to one."""


def parse_quantity(text: str) -> Quantity | None:
    """The first number in `text`, with its unit when it has a known one; else None."""
    found = all_quantities(text, first_only=True)
    return found[0] if found else None


# Multipliers written as words: "3.5 million" is not 3.5.
_MAGNITUDE_WORDS = frozenset(
    (
        *("k", "m", "b", "bn", "mn", "mil", "thousand", "thousands", "million", "millions"),
        *("billion", "billions", "trillion", "lakh", "crore"),
    )
)
_LITERAL = re.compile(r"^([+-]?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?([万亿])?(\s*)(.*)$", re.DOTALL)


def parse_literal_quantity(text: str) -> Quantity | None:
    """A number a plan writes as an operand ("4", "4 GB", "8GB", "-2.5", "1.5万", "64 GPUs"),
    or None when the text is not one number.

    Deliberately strict: a suffix glued to the digits must be a known unit, so "3.5k", "2M"
    or "1e3" are not numbers (read as 3.5, 2 and 1 they were silently wrong); a word after a
    space is a unit when known, else a noun ("64 GPUs" is 64).
    """
    normal = unicodedata.normalize("NFKC", text).strip().replace("−", "-")
    match = _LITERAL.match(normal)
    if match is None:
        return None
    sign, digits, decimals, magnitude, space, rest = match.groups()
    value = float(f"{sign}{digits.replace(',', '')}{decimals or ''}")
    if magnitude:
        value *= _CN_MAGNITUDES[magnitude]
    rest = rest.strip()
    if not rest:
        return Quantity(value)
    if not space:  # glued: "8GB", "30s", "5%" — never "2M" (mega? metres?) or "3.5k"
        glued = rest in _UNITS or not rest.isascii() or rest.islower()
        unit = _ALIASES.get(rest.casefold(), "") if glued else ""
        return Quantity(value, unit) if unit else None
    unit = _ALIASES.get(rest) or _ALIASES.get(rest.casefold(), "")
    if unit:
        return Quantity(value, unit)
    word = rest.casefold()
    if word in _MAGNITUDE_WORDS or not re.fullmatch(r"[^\W\d_]{2,}", rest):
        return None
    return Quantity(value)  # one word that is no unit: a noun ("64 GPUs")


def is_unit(word: str) -> bool:
    """Whether `word` alone is a unit quantities are read in ("minutes", "MB", "小时", "%"):
    a measure, never a name (the NLP extractor leaves such terms out)."""
    word = unicodedata.normalize("NFKC", word).strip()
    if word in _UNITS or word in _ALIASES:
        return True
    # "Minutes" opens a sentence; "MM" (OpenMMLab) is a name, not millimetres.
    return word[1:].islower() and word.casefold() in _ALIASES


def parse_number(text: str) -> float | None:
    quantity = parse_quantity(text)
    return None if quantity is None else quantity.value


def all_quantities(text: str, *, first_only: bool = False) -> list[Quantity]:
    normal = unicodedata.normalize("NFKC", text).replace("−", "-")
    found: list[Quantity] = []
    for m in _NUMBER.finditer(normal):
        value = float(f"{m.group(1)}{m.group(2).replace(',', '')}{m.group(3) or ''}")
        end = m.end()
        magnitude = _CN_MAGNITUDES.get(normal[end : end + 1])
        if magnitude:
            value *= magnitude
            end += 1
        found.append(Quantity(value, _unit_at(normal, end)))
        if first_only:
            return found
    if found:
        return found
    for match in _CN_RUN.finditer(normal):
        run = match.group(0)
        after = normal[match.end() : match.end() + 1]
        lone = len(run) == 1 and run in _CN_DIGITS and normal.strip() != run
        if lone and (not after or after not in _CN_MEASURE):
            continue
        number = chinese_number(run)
        if number is not None:
            found.append(Quantity(float(number), _unit_at(normal, match.end())))
            if first_only:
                break
    return found


def _unit_at(text: str, position: int) -> str:
    match = _UNIT_AFTER.match(text, position)
    if match is None:
        return ""
    word = match.group(1)
    return _ALIASES.get(word) or _ALIASES.get(word.casefold(), "")


def chinese_number(run: str) -> int | None:
    """A simple Chinese numeral: digits with 十/百/千 within 万 and 亿 sections."""
    if not any(ch in _CN_DIGITS or ch in _CN_UNITS for ch in run):
        return None  # "万" or "亿" alone is a word, not a number
    total = section = digit = 0
    for ch in run:
        if ch in _CN_DIGITS:
            digit = _CN_DIGITS[ch]
        elif ch in _CN_UNITS:
            section += (digit or 1) * _CN_UNITS[ch]
            digit = 0
        elif ch == "万":
            total += (section + digit) * 10_000
            section = digit = 0
        elif ch == "亿":
            total = (total + section + digit) * 100_000_000
            section = digit = 0
    return total + section + digit


def in_one_unit(quantities: Sequence[Quantity]) -> tuple[list[float], str]:
    """The values in one unit (the first one named), and that unit; UnitMismatch if none fits."""
    units = list(dict.fromkeys(q.unit for q in quantities if q.unit))
    if len(units) <= 1:
        return [q.value for q in quantities], units[0] if units else ""
    if any(not q.unit for q in quantities):
        raise UnitMismatch(f"values in {', '.join(units)} mixed with values without a unit")
    dimensions = {_UNITS[u][0] for u in units}
    if len(dimensions) > 1:
        raise UnitMismatch(f"values in units that do not convert: {', '.join(units)}")
    target = _UNITS[units[0]][1]
    return [q.value * _UNITS[q.unit][1] / target for q in quantities], units[0]


def format_number(value: float, unit: str = "") -> str:
    """12.0 → "12"; 0.1 + 0.2 → "0.3": integers plainly, others to six decimals at most."""
    if abs(value - round(value)) < 1e-9:
        text = str(round(value))
    else:
        text = f"{value:.6f}".rstrip("0").rstrip(".")
    if not unit:
        return text
    return f"{text}{unit}" if unit == "%" else f"{text} {unit}"


__all__ = [
    "Quantity",
    "UnitMismatch",
    "all_quantities",
    "chinese_number",
    "format_number",
    "in_one_unit",
    "parse_literal_quantity",
    "parse_number",
    "parse_quantity",
]
