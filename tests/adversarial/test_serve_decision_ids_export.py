"""What a /v1 caller writes into the decision log, read back through the console's export, on a
real `tacit serve`: ids with control characters are refused where they enter (a newline in a
channel split the decision log's index key in two), and message text a spreadsheet would run
as a formula, even behind spaces, quotes or as a fullwidth sign, is exported inert."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.adversarial.serve_support import Serving, console_client, tacit_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

API_TOKEN = "api-token-0123456789abcdef"
HOSTILE_IDS = ("evil\nother", "a\r\nb", "tab\there", "nul\x00", "esc\x1b[31m", "line\u2028sep")
FORMULAS = (
    '=HYPERLINK("http://evil.example")',
    " =1+1",
    "\n=1+1",
    '"=1+1',
    "'=1+1",
    "  @SUM(A1)",
    "＝1+1",
    "\u00a0-2+3",
)


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with tacit_serve(
        tmp_path_factory.mktemp("decision-ids"), {"TACIT_SERVER__API_TOKEN": API_TOKEN}
    ) as served:
        yield served


def api(serving: Serving) -> httpx.Client:
    return httpx.Client(
        base_url=serving.url, timeout=60, headers={"Authorization": f"Bearer {API_TOKEN}"}
    )


def exported(serving: Serving, kind: str) -> str:
    client, _ = console_client(serving)
    try:
        reply = client.get(f"/console/decisions/export?format={kind}")
    finally:
        client.close()
    assert reply.status_code == 200
    return reply.text


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_ids_with_control_characters_are_refused_where_they_enter(
    serving: Serving, hostile: str
) -> None:
    with api(serving) as client:
        bodies = [
            ("/v1/ask", {"question": "How do I roll back a deploy?", "channel": hostile}),
            ("/v1/ask", {"question": "How?", "channel": "ok", "thread": hostile}),
            ("/v1/events", {"channel": hostile, "text": "hi", "message_id": "m1"}),
            (
                "/v1/events",
                {"channel": "ok", "workspace": hostile, "text": "hi", "message_id": "m"},
            ),
            ("/v1/events", {"channel": "ok", "text": "hi", "message_id": hostile}),
            ("/v1/events", {"channel": "ok", "text": "hi", "message_id": "m", "user": hostile}),
        ]
        for path, body in bodies:
            reply = client.post(path, json=body)
            assert reply.status_code == 400, (path, body, reply.text[:300])
    assert "evil" not in exported(serving, "jsonl")


def test_formula_cells_are_exported_inert(serving: Serving) -> None:
    with api(serving) as client:
        for n, text in enumerate(FORMULAS):
            reply = client.post(
                "/v1/events",
                json={"channel": "sheet", "text": text, "message_id": f"f{n}", "addressed": True},
            )
            assert reply.status_code == 202, reply.text
    deadline = time.monotonic() + 60
    while True:
        rows = [r for r in csv.DictReader(io.StringIO(exported(serving, "csv")))]
        texts = [r["text"] for r in rows if r["channel"] == "sheet"]
        if len(texts) == len(FORMULAS) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(texts) == sorted("'" + text for text in FORMULAS)
