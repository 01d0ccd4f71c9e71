"""The label actions (undo, re-ask, refit) on a real `tacit serve` against a KB name that is
no KB name: read as the default KB, `kb=Default` (or `../x`) undid the default KB's label and
would refit its gate. They are refused, as the Knowledge page's actions refuse them, and the
label stays in force. A name with a trailing newline passed the KB name check ($ matches
before a final newline): a KB "ops\n" could be created, folder and keys with a newline in them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.adversarial.serve_support import Serving, console_client, tacit_serve

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

API_TOKEN = "api-token-0123456789abcdef"
NOT_KB_NAMES = ("Default", "../default", "default\n", "ｄefault")


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    with tacit_serve(
        tmp_path_factory.mktemp("label-actions"), {"TACIT_SERVER__API_TOKEN": API_TOKEN}
    ) as served:
        yield served


def labelled_decision(serving: Serving, client: httpx.Client, headers: dict[str, str]) -> str:
    """A decision of the default KB, labelled by the admin: its trace id."""
    with httpx.Client(base_url=serving.url, timeout=60) as api:
        queued = api.post(
            "/v1/events",
            json={
                "channel": "labels",
                "text": "where is the runbook?",
                "message_id": "q1",
                "addressed": True,
            },
            headers={"Authorization": f"Bearer {API_TOKEN}"},
        )
        assert queued.status_code == 202, queued.text
    deadline = time.monotonic() + 60
    while True:
        rows = client.get("/console/decisions/export?format=jsonl").text.splitlines()
        found = [json.loads(r) for r in rows if json.loads(r)["channel"] == "labels"]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    trace_id = str(found[0]["trace_id"])
    marked = client.post(
        f"/console/decisions/{trace_id}/label", data={"label": "silent"}, headers=headers
    )
    assert marked.status_code == 200, marked.text
    return trace_id


def test_an_action_naming_no_kb_is_refused_and_touches_no_label(serving: Serving) -> None:
    client, headers = console_client(serving)
    try:
        trace_id = labelled_decision(serving, client, headers)
        for name in NOT_KB_NAMES:
            undo = client.post(
                "/console/labels/undo",
                data={"kb": name, "trace_id": trace_id, "strength": "admin"},
                headers=headers,
            )
            assert undo.status_code == 400, (name, undo.status_code, undo.text[:300])
            for path in ("/console/gate/reask", "/console/gate/refit"):
                refused = client.post(path, data={"kb": name}, headers=headers)
                assert refused.status_code == 400, (path, name, refused.status_code)
        assert trace_id in client.get("/console/labels?kb=default").text
        undone = client.post(
            "/console/labels/undo",
            data={"kb": "default", "trace_id": trace_id, "strength": "admin"},
            headers=headers,
        )
        assert undone.status_code == 200, undone.text
    finally:
        client.close()


@pytest.mark.parametrize("name", ["default\n", "ops\n"])
def test_a_kb_name_with_a_trailing_newline_is_no_kb_name(serving: Serving, name: str) -> None:
    client, headers = console_client(serving)
    try:
        for path, data in (
            ("/console/knowledge/reindex", {"kb": name}),
            ("/console/knowledge/remove", {"kb": name, "source": "a.md"}),
            ("/console/knowledge/bind", {"channel": "http::nl", "kb": name, "mode": "mention"}),
            ("/console/labels/undo", {"kb": name, "trace_id": "t", "strength": "admin"}),
            ("/console/gate/refit", {"kb": name}),
        ):
            refused = client.post(path, data=data, headers=headers)
            assert refused.status_code == 400, (path, name, refused.status_code, refused.text[:200])
        uploaded = client.post(
            "/console/knowledge/upload",
            data={"kb": name},
            files={"files": ("note.md", b"# Note\n\nA note.\n", "text/markdown")},
            headers=headers,
        )
        assert uploaded.status_code == 400, (name, uploaded.status_code, uploaded.text[:200])
    finally:
        client.close()
    assert not list((serving.log.parent / "serve-home").rglob("*\n*"))
