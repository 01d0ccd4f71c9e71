"""A date the decisions filter cannot read is said so, not ignored silently (the list then
shows every decision, which looked like a filter that matched everything)."""

from __future__ import annotations

import httpx


async def test_an_unreadable_date_is_named_and_marked(admin: httpx.AsyncClient) -> None:
    page = await admin.get("/console/decisions", params={"since": "last tuesday", "until": ""})
    assert page.status_code == 200
    assert 'id="date-filter-error" role="alert"' in page.text
    assert "“last tuesday” in <b>since</b>" in page.text
    assert 'name="since" value="last tuesday" aria-invalid="true"' in page.text
    assert 'name="until" value="" aria-invalid' not in page.text


async def test_readable_dates_raise_nothing(admin: httpx.AsyncClient) -> None:
    page = await admin.get(
        "/console/decisions", params={"since": "2026-12-01", "until": "2026-12-07T10:30"}
    )
    assert page.status_code == 200 and "date-filter-error" not in page.text
