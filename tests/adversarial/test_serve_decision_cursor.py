"""The Decisions page's cursor (`?before=`, a score) on a real `tacit serve`: what Python's
float() reads but Redis does not ("nan", "1e400", "5_0") made the page a 500 with a traceback
in the log; any cursor now shows a page."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.adversarial.serve_support import Serving, console_client, tacit_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

CURSORS = ("nan", "NaN", "inf", "-infinity", "1e400", "5_0", " 5 ", "0x10", "(5", "9" * 5000, "")


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with tacit_serve(tmp_path_factory.mktemp("decision-cursor")) as served:
        yield served


def test_any_cursor_shows_a_page(serving: Serving) -> None:
    client, _ = console_client(serving)
    try:
        for cursor in CURSORS:
            reply = client.get("/console/decisions", params={"before": cursor})
            assert reply.status_code == 200, (cursor[:20], reply.status_code)
    finally:
        client.close()
    assert "Traceback" not in serving.log_text()
