"""Numbers, units and the computing operators (core/language/quantities.py, operators.py)."""

from __future__ import annotations

import pytest

from core.language.quantities import (
    Quantity,
    UnitMismatch,
    chinese_number,
    format_number,
    in_one_unit,
    is_unit,
    parse_number,
    parse_quantity,
)
from core.reason.operators import (
    Item,
    StepFailed,
    StepResult,
    compare_values,
    count_items,
    filter_items,
    sort_items,
    sum_items,
)


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("1,200", 1200.0),
        ("3.5", 3.5),
        ("-2", -2.0),
        ("about 3,400.5 kg", 3400.5),
        ("１２３", 123.0),  # full-width
        ("株高95厘米", 95.0),
        ("1.5万", 15000.0),
        ("十二", 12.0),
        ("二十", 20.0),
        ("十", 10.0),
        ("两千零五", 2005.0),
        ("一亿五千万", 150_000_000.0),
        ("五个品种", 5.0),
        ("Zhefu 802", 802.0),
        ("Zhefu-802", None),  # part of a name
        ("H2O", None),
        ("v2 release", None),
        ("统一标准", None),  # "一" inside a word is not a number
        ("万", None),
        ("no number here", None),
        ("3.5k", 3.5),  # suffixes are not expanded (documented)
    ],
)
def test_parse_number(text: str, number: float | None) -> None:
    assert parse_number(text) == number


@pytest.mark.parametrize(
    ("text", "quantity"),
    [
        ("16 GB", Quantity(16, "GB")),
        ("8gb", Quantity(8, "GB")),
        ("1,200 MB of memory", Quantity(1200, "MB")),
        ("95 cm", Quantity(95, "cm")),
        ("95厘米", Quantity(95, "cm")),
        ("3 minutes", Quantity(3, "min")),
        ("2小时", Quantity(2, "h")),
        ("45%", Quantity(45, "%")),
        ("64 GPUs", Quantity(64, "")),  # a noun, not a unit
        ("12 services", Quantity(12, "")),
        ("2 公斤", Quantity(2, "kg")),
    ],
)
def test_parse_quantity_keeps_known_units(text: str, quantity: Quantity) -> None:
    assert parse_quantity(text) == quantity


def test_chinese_number_needs_a_digit() -> None:
    assert chinese_number("亿") is None
    assert chinese_number("三百零七") == 307


def test_in_one_unit_converts_to_the_first_unit() -> None:
    values, unit = in_one_unit([Quantity(1, "GB"), Quantity(500, "MB")])
    assert unit == "GB" and values == pytest.approx([1.0, 0.5])
    assert in_one_unit([Quantity(3), Quantity(4, "s")]) == ([3.0, 4.0], "s")  # one unit: shared
    with pytest.raises(UnitMismatch, match="do not convert"):
        in_one_unit([Quantity(1, "GB"), Quantity(1, "s")])
    with pytest.raises(UnitMismatch, match="without a unit"):
        in_one_unit([Quantity(1, "GB"), Quantity(1, "MB"), Quantity(7)])


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(12.0, "", "12"), (0.1 + 0.2, "", "0.3"), (-3.25, "GB", "-3.25 GB"), (45, "%", "45%")],
)
def test_format_number(value: float, unit: str, text: str) -> None:
    assert format_number(value, unit) == text


SERVICES = StepResult(
    "four",
    (Item("ledger", "8 GB"), Item("gateway", "2 GB"), Item("search", ""), Item("auth", "512 MB")),
    listed=True,
)


def test_filter_skips_items_without_a_number() -> None:
    kept = filter_items(SERVICES, "value", ">=", "0.5 GB")
    assert [i.name for i in kept.items] == ["ledger", "gateway", "auth"]
    assert filter_items(SERVICES, "value", "=", "2 GB").names() == ["gateway"]
    assert filter_items(SERVICES, "name", "not_contains", "A").names() == ["ledger"]
    assert filter_items(SERVICES, "name", "=", "Ledger").names() == ["ledger"]  # text equality
    with pytest.raises(StepFailed):
        filter_items(SERVICES, "value", "<", "small")


def test_sort_puts_items_without_a_number_last() -> None:
    ranked = sort_items(SERVICES, "value", "asc", None)
    assert ranked.names() == ["auth", "gateway", "ledger", "search"]
    assert sort_items(SERVICES, "name", "desc", 2).names() == ["search", "ledger"]


def test_count_dedupes_by_name_across_results() -> None:
    other = StepResult("x", (Item("Ledger"), Item("billing")), listed=True)
    assert count_items([SERVICES, other]).text == "5"
    assert count_items([StepResult("(none)", (), listed=True)]).text == "0"
    with pytest.raises(StepFailed, match="nothing to count"):
        count_items([StepResult("There are 12.")])


def test_sum_fails_when_any_part_is_missing() -> None:
    with pytest.raises(StepFailed, match="no number in 'search'"):
        sum_items([SERVICES])
    total = sum_items([StepResult("x", (Item("a", "1 min"), Item("b", "30 s")), listed=True)])
    assert total.text == "1.5 min"
    assert (
        sum_items(
            [StepResult("3", quantity=Quantity(3)), StepResult("4", quantity=Quantity(4))]
        ).text
        == "7"
    )


def test_compare() -> None:
    assert compare_values(Quantity(1, "GB"), Quantity(900, "MB"), "greater", "en").text == (
        "yes (1 GB > 0.9 GB)"
    )
    difference = compare_values(Quantity(95, "cm"), Quantity(0.8, "m"), "difference", "en")
    assert difference.text == "15 cm"
    assert difference.quantity == Quantity(pytest.approx(15.0), "cm")  # type: ignore[arg-type]
    assert compare_values(Quantity(2), Quantity(2), "equal", "zh").text == "是 (2 = 2)"
    assert compare_values(Quantity(2), Quantity(3), "not_equal", "en").text.startswith("yes")
    with pytest.raises(StepFailed, match="do not convert"):
        compare_values(Quantity(1, "GB"), Quantity(1, "h"), "less", "en")


def test_is_unit_knows_the_units_quantities_are_read_in() -> None:
    assert all(is_unit(w) for w in ["minutes", "Minutes", "MB", "mb", "GiB", "小时", "分钟", "％"])
    assert not any(is_unit(w) for w in ["", " ", "GPUs", "segment", "30m", "端口", "owner", "MM"])


def test_kubernetes_binary_sizes_compare_with_their_spelled_out_units() -> None:
    # A relay model kept a manifest's "512Mi" as written beside a planner filter of "1 GiB":
    # read without a unit, 512 was compared as a bare number and the filter could not decide.
    sizes = [parse_quantity(text) for text in ("512Mi", "2Gi", "1 GiB", "64Ki")]
    assert [q.unit for q in sizes if q] == ["MiB", "GiB", "GiB", "KiB"]
    values, unit = in_one_unit([q for q in sizes if q])
    assert unit == "MiB" and values == [512.0, 2048.0, 1024.0, 0.0625]
