"""`[console] index_roots` holds for every path the console takes.

Before the fix the index form checked the root but the re-index form did not: `source=` named
any readable file (`/etc/passwd`, or `../../` out of the upload folder) and it was indexed; and
an empty index_roots, the default, let the index form take any path the server could read."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from adapters.state.redis_store import RedisStateStore
from bot.console import console_mount
from bot.console.auth import ConsoleAuth
from bot.console.context import Console
from bot.console.jobs import Job, Jobs
from bot.console.knowledge import upload_dir
from bot.conversation_state import ConversationState
from bot.gate_labels import GateLabels
from bot.settings import ConsoleSettings, ConversationSettings, Settings

TOKEN = "console-token-0123456789"
BASE = "http://console.test"
SECRET = "root:x:0:0:the outside secret:/root:/bin/bash"


class RecordedJobs(Jobs):
    """Runs nothing: records which paths each started run would have indexed."""

    def __init__(self) -> None:
        super().__init__()
        self.started: list[str] = []

    def start(
        self,
        kb: str,
        what: str,
        run: Callable[[Job], Awaitable[str]],
        kind: str = "index",
        *,
        key: str = "",
    ) -> Job:
        self.started.append(what)
        job = Job("0123456789ab", kb, what, kind, key=key)
        job.finished = 0.0
        return job


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RedisStateStore]:
    state = await RedisStateStore.embedded(tmp_path / "state.rdb")
    yield state
    await state.aclose()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "etc" / "passwd"
    secret.parent.mkdir()
    secret.write_text(SECRET)
    return secret


def console_for(store: RedisStateStore, tmp_path: Path, **console: Any) -> Console:
    settings = Settings(
        home=tmp_path / "home",
        console=ConsoleSettings(admin_token=TOKEN, **console),
        conversation=ConversationSettings(),
    )
    return Console(
        settings=settings,
        store=store,
        state=ConversationState(store, settings.conversation, default_kb="default"),
        services=None,  # type: ignore[arg-type]  # no run is started (RecordedJobs)
        gate=None,
        reindex=None,
        auth=ConsoleAuth(store, settings.console),
        labels=GateLabels(store),
        jobs=RecordedJobs(),
    )


@pytest.fixture
def make_client() -> Callable[[Console], Awaitable[tuple[httpx.AsyncClient, dict[str, str]]]]:
    async def make(console: Console) -> tuple[httpx.AsyncClient, dict[str, str]]:
        app = Starlette(routes=[console_mount(console)])
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE)
        login = await http.post("/console/login", data={"token": TOKEN}, headers={"Origin": BASE})
        assert login.status_code == 303
        page = await http.get("/console/playground")
        csrf = re.search(r'name="csrf-token" content="([^"]+)"', page.text)
        assert csrf
        return http, {"Origin": BASE, "X-CSRF-Token": csrf.group(1), "HX-Request": "true"}

    return make


async def test_reindex_cannot_name_a_file_outside_the_roots(
    store: RedisStateStore, tmp_path: Path, outside: Path, make_client: Any
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# OK\n")
    console = console_for(store, tmp_path, index_roots=[docs])
    http, headers = await make_client(console)
    try:
        for source in (str(outside), "../../etc/passwd", "../../../etc/passwd", "/etc/passwd"):
            reply = await http.post(
                "/console/knowledge/reindex", data={"source": source}, headers=headers
            )
            assert reply.status_code == 404, (source, reply.text)
        indexed = await http.post(
            "/console/knowledge/index", data={"path": str(docs)}, headers=headers
        )
        assert indexed.status_code == 200
        # The root is now known: a source under it re-indexes, one climbing out of it not.
        ok = await http.post(
            "/console/knowledge/reindex", data={"source": "docs/ok.md"}, headers=headers
        )
        assert ok.status_code == 200
        climbing = await http.post(
            "/console/knowledge/reindex", data={"source": "docs/../etc/passwd"}, headers=headers
        )
        assert climbing.status_code == 404
    finally:
        await http.aclose()
    assert console.jobs.started == [f"index of {docs}", "re-index of docs/ok.md"]  # type: ignore[attr-defined]


async def test_empty_index_roots_means_uploads_only(
    store: RedisStateStore, tmp_path: Path, outside: Path, make_client: Any
) -> None:
    console = console_for(store, tmp_path)  # index_roots unset: the documented default
    uploads = upload_dir(console, "default")
    uploads.mkdir(parents=True)
    (uploads / "kept.md").write_text("# Kept\n")
    http, headers = await make_client(console)
    try:
        typed = await http.post(
            "/console/knowledge/index", data={"path": str(outside)}, headers=headers
        )
        assert typed.status_code == 403
        assert "index_roots" in typed.text and "Upload the files instead" in typed.text
        missing = await http.post(
            "/console/knowledge/index", data={"path": str(tmp_path / "nowhere")}, headers=headers
        )
        assert missing.status_code == 403  # no telling what exists outside the roots
        direct = await http.post(
            "/console/knowledge/reindex", data={"source": str(outside)}, headers=headers
        )
        assert direct.status_code == 404
        upload = await http.post(
            "/console/knowledge/reindex", data={"source": "kept.md"}, headers=headers
        )
        assert upload.status_code == 200
    finally:
        await http.aclose()
    assert console.jobs.started == ["re-index of kept.md"]  # type: ignore[attr-defined]


async def test_a_root_recorded_before_index_roots_changed_is_not_reindexed(
    store: RedisStateStore, tmp_path: Path, outside: Path, make_client: Any
) -> None:
    console = console_for(store, tmp_path)
    await store.push("console:{kb:default}:roots", str(outside.parent), max_len=100)
    http, headers = await make_client(console)
    try:
        whole = await http.post("/console/knowledge/reindex", data={}, headers=headers)
        named = await http.post(
            "/console/knowledge/reindex", data={"source": "etc/passwd"}, headers=headers
        )
    finally:
        await http.aclose()
    assert whole.status_code == 404 and named.status_code == 404
    assert console.jobs.started == []  # type: ignore[attr-defined]


async def test_an_upload_name_over_255_bytes_is_a_clear_400(
    store: RedisStateStore, tmp_path: Path, make_client: Any
) -> None:
    """Before the fix the file system's ENAMETOOLONG surfaced as a 500."""
    console = console_for(store, tmp_path)
    http, headers = await make_client(console)
    try:
        for name in ("a" * 300 + ".md", "é" * 130 + ".md"):  # 300 bytes; 260 bytes in UTF-8
            reply = await http.post(
                "/console/knowledge/upload",
                files={"files": (name, b"# Title\n\ntext\n", "text/markdown")},
                headers=headers,
            )
            assert reply.status_code == 400, reply.text
            assert "too long" in reply.text and "rename the file" in reply.text
        fine = await http.post(
            "/console/knowledge/upload",
            files={"files": ("runbook.md", b"# Title\n\ntext\n", "text/markdown")},
            headers=headers,
        )
        assert fine.status_code == 200
    finally:
        await http.aclose()
    assert console.jobs.started == ["upload of runbook.md"]  # type: ignore[attr-defined]
    assert not any(len(p.name) > 255 for p in upload_dir(console, "default").iterdir())
