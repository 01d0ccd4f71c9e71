"""Telegram with more than one replica: one poller at a time under a Redis lease (another takes
over when it dies), reply roots every replica can read, and `tacit serve` in webhook mode
registering its webhook with the secret and answering what Telegram posts to it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.chat.lease import LeasedWork
from adapters.chat.telegram import SECRET_HEADER, TelegramAdapter
from adapters.state.redis_store import RedisStateStore
from core.conversation import FinalReply, Message, ReplyEvent, TextDelta
from core.errors import StoreUnavailable
from tests import chat_fakes
from tests.bot.commands import test_chat_and_serve
from tests.bot.commands.test_chat_and_serve import _free_port
from tests.chat_fakes import TELEGRAM_WEBHOOK_SECRET, Recorder, fake_server
from tests.conftest import REPO
from tests.fakes.fake_telegram import BOT, GROUP, GROUP_ID, TOKEN, FakeTelegram, text_update

indexed_home = test_chat_and_serve.indexed_home  # the fixture: a home with KB "ops" indexed


telegram = fake_server(FakeTelegram)
store = chat_fakes.state_store


def _replica(
    telegram: FakeTelegram, recorder: Recorder, store: RedisStateStore, **options: object
) -> TelegramAdapter:
    return TelegramAdapter(
        bot_token=TOKEN,
        submit=recorder.submit,
        feedback=recorder.record_feedback,
        api_url=telegram.base_url,
        edit_interval=0.05,
        poll_timeout=1,
        state=store,
        lease_ttl=1.0,
        lease_retry=0.2,
        **options,  # type: ignore[arg-type]
    )


async def _until(check: object, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _kill(lease: LeasedWork) -> None:
    """A replica dying: its work and renewals stop, and nobody releases the lease."""
    assert lease._runner is not None
    lease._runner.cancel()


async def test_one_replica_polls_and_another_takes_over_when_it_dies(
    telegram: FakeTelegram, store: RedisStateStore
) -> None:
    first, second = Recorder(), Recorder()
    replicas = [_replica(telegram, first, store), _replica(telegram, second, store)]
    for replica in replicas:
        await replica.start()
    try:
        leases = [r.polling_lease for r in replicas]
        assert leases[0] is not None and leases[1] is not None
        await _until(lambda: any(lease.holding for lease in leases))  # type: ignore[union-attr]
        await asyncio.sleep(0.5)  # a second poller, were there one, would have started by now
        assert [lease.holding for lease in leases].count(True) == 1  # type: ignore[union-attr]
        holder = 0 if leases[0].holding else 1
        recorders = (first, second)
        for n in range(5):
            telegram.push_update(text_update(f"/ask question {n}", message_id=100 + n))
        await _until(lambda: len(recorders[holder].messages) == 5)
        assert recorders[1 - holder].messages == []
        await asyncio.sleep(0.3)  # the holder records how far it got

        died_at = time.monotonic()
        _kill(leases[holder])  # type: ignore[arg-type]
        await _until(lambda: leases[1 - holder].holding)  # type: ignore[union-attr]
        takeover = time.monotonic() - died_at
        for n in range(5, 8):
            telegram.push_update(text_update(f"/ask question {n}", message_id=100 + n))
        await _until(lambda: len(recorders[1 - holder].messages) == 3)
    finally:
        for replica in replicas:
            await replica.aclose()
    # The lease (1 s) expires unrenewed, and the standby tries every 0.2 s.
    assert takeover < 1.0 + 0.2 + 1.0, takeover
    # Handled side by side: in any order, each once, none of those the dead one took.
    taken_over = sorted(m.text for m in recorders[1 - holder].messages)
    assert taken_over == [f"question {n}" for n in (5, 6, 7)]
    assert len(recorders[holder].messages) == 5


async def test_a_graceful_stop_hands_polling_over_at_once(
    telegram: FakeTelegram, store: RedisStateStore
) -> None:
    first, second = Recorder(), Recorder()
    leader = _replica(telegram, first, store)
    await leader.start()
    assert leader.polling_lease is not None
    await _until(lambda: leader.polling_lease.holding)
    standby = _replica(telegram, second, store)
    await standby.start()
    try:
        await asyncio.sleep(0.3)
        assert standby.polling_lease is not None and not standby.polling_lease.holding
        stopped_at = time.monotonic()
        await leader.stop()  # releases the lease rather than letting it expire
        await _until(lambda: standby.polling_lease.holding)
        handover = time.monotonic() - stopped_at
        telegram.push_update(text_update("/ask after the handover", message_id=300))
        await _until(lambda: len(second.messages) == 1)
    finally:
        await standby.aclose()
        await leader.aclose()
    assert handover < 0.2 + 0.5, handover  # one retry interval, not the lease's TTL
    assert first.messages == []


async def test_a_reply_to_an_answer_finds_its_thread_on_any_replica(
    telegram: FakeTelegram, store: RedisStateStore
) -> None:
    """Replica A answers; the reply to that answer arrives at replica B (no forum topic, no
    message_thread_id): B must still put it in A's conversation."""
    seen_a, seen_b = Recorder(), Recorder()
    a = _replica(telegram, seen_a, store, mode="webhook", webhook_secret=TELEGRAM_WEBHOOK_SECRET)
    b = _replica(telegram, seen_b, store, mode="webhook", webhook_secret=TELEGRAM_WEBHOOK_SECRET)
    for replica in (a, b):
        await replica.application.initialize()
    try:
        from telegram import Update

        question = text_update("/ask how do I roll back?", message_id=41)
        await a.application.process_update(Update.de_json(question, a.bot))
        (asked,) = seen_a.messages

        async def answer() -> AsyncIterator[ReplyEvent]:
            yield FinalReply(text="Run deployctl rollback.", citations=(), trace_id="t1")

        await a.deliver(asked, answer())
        (sent,) = telegram.replies_to(GROUP_ID, 41)
        reply = text_update(
            "and how long does it take?",
            message_id=43,
            reply_to={
                "message_id": sent.message_id,
                "date": int(time.time()),
                "chat": GROUP,
                "from": BOT,
                "text": sent.text,
            },
        )
        await b.application.process_update(Update.de_json(reply, b.bot))
    finally:
        for replica in (a, b):
            await replica.application.shutdown()
    (followed,) = seen_b.messages
    assert isinstance(followed, Message)
    assert followed.thread == asked.thread == "41"
    assert followed.addressed  # a reply to the bot


async def test_an_answer_run_again_after_a_crash_edits_its_reply_rather_than_sending_another(
    telegram: FakeTelegram, store: RedisStateStore
) -> None:
    """bench_faults (issue 38): serve killed (-9) while a reply was streaming; the re-run of
    the entry on the restarted serve sent a second reply under the first, truncated one."""
    seen_a, seen_b = Recorder(), Recorder()
    a = _replica(telegram, seen_a, store, mode="webhook", webhook_secret=TELEGRAM_WEBHOOK_SECRET)
    b = _replica(telegram, seen_b, store, mode="webhook", webhook_secret=TELEGRAM_WEBHOOK_SECRET)
    for replica in (a, b):
        await replica.application.initialize()
    try:
        from telegram import Update

        question = text_update("/ask how do I roll back?", message_id=51)
        await a.application.process_update(Update.de_json(question, a.bot))
        (asked,) = seen_a.messages

        async def dies_mid_stream() -> AsyncIterator[ReplyEvent]:
            yield TextDelta("Run deploy")
            await _until(lambda: telegram.replies_to(GROUP_ID, 51))
            await asyncio.sleep(0.3)  # the reply went out a while before the process died
            raise ConnectionError("the process died")

        with pytest.raises(ConnectionError):
            await a.deliver(asked, dies_mid_stream())

        async def answer() -> AsyncIterator[ReplyEvent]:
            yield FinalReply(text="Run deployctl rollback.", citations=(), trace_id="t2")

        await b.deliver(asked, answer())  # the entry, reclaimed by another replica
    finally:
        for replica in (a, b):
            await replica.application.shutdown()
    (reply,) = telegram.replies_to(GROUP_ID, 51)
    assert "deployctl rollback" in reply.text
    assert reply.edits == 1


class _Outage:
    """Redis down for the StateStore's reads and writes while `down` (as in bench_faults,
    Redis killed -9 and restarted on its AOF), up again after."""

    def __init__(self, store: RedisStateStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.down = False
        for name in ("get", "set"):
            call = getattr(store, name)
            monkeypatch.setattr(store, name, self._failing(name, call))

    def _failing(self, name: str, call: Any) -> Any:
        async def failing(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                raise StoreUnavailable(f"Redis is unavailable ({name}: connection refused)")
            return await call(*args, **kwargs)

        return failing


async def _asked(replica: TelegramAdapter, seen: Recorder, message_id: int) -> Message:
    from telegram import Update

    question = text_update("/ask how do I roll back?", message_id=message_id)
    await replica.application.process_update(Update.de_json(question, replica.bot))
    return seen.messages[-1]


async def _dies_after_its_reply_went_out(
    telegram: FakeTelegram, message_id: int
) -> AsyncIterator[ReplyEvent]:
    yield TextDelta("Run deploy")
    await _until(lambda: telegram.replies_to(GROUP_ID, message_id))
    await asyncio.sleep(0.3)
    raise ConnectionError("the store failed the entry")


async def _answer() -> AsyncIterator[ReplyEvent]:
    yield FinalReply(text="Run deployctl rollback.", citations=(), trace_id="t2")


async def test_an_answer_run_again_while_the_store_is_down_edits_its_reply(
    telegram: FakeTelegram, store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bench_faults (issue 38): Redis was down when the first reply went out, so its id was
    not stored; the entry failed, and its re-run in the same process, the store still down,
    could not look the reply up and sent a second one."""
    seen = Recorder()
    a = _replica(telegram, seen, store, mode="webhook", webhook_secret=TELEGRAM_WEBHOOK_SECRET)
    await a.application.initialize()
    outage = _Outage(store, monkeypatch)
    try:
        asked = await _asked(a, seen, 61)
        outage.down = True
        with pytest.raises(ConnectionError):
            await a.deliver(asked, _dies_after_its_reply_went_out(telegram, 61))
        await a.deliver(asked, _answer())  # the re-run, in the same process
    finally:
        await a.application.shutdown()
    (reply,) = telegram.replies_to(GROUP_ID, 61)
    assert reply.text.startswith("Run deployctl rollback.")
    assert reply.edits >= 1


async def test_a_reply_id_the_store_missed_is_stored_once_it_is_back(
    telegram: FakeTelegram, store: RedisStateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reply went out while Redis was down; Redis came back and this replica answered
    something else; then it died, and another replica ran the first entry again."""
    seen_a, seen_b = Recorder(), Recorder()
    a = _replica(telegram, seen_a, store, mode="webhook", webhook_secret=TELEGRAM_WEBHOOK_SECRET)
    b = _replica(telegram, seen_b, store, mode="webhook", webhook_secret=TELEGRAM_WEBHOOK_SECRET)
    for replica in (a, b):
        await replica.application.initialize()
    outage = _Outage(store, monkeypatch)
    try:
        asked = await _asked(a, seen_a, 71)
        outage.down = True
        with pytest.raises(ConnectionError):
            await a.deliver(asked, _dies_after_its_reply_went_out(telegram, 71))
        outage.down = False
        await a.deliver(await _asked(a, seen_a, 72), _answer())
        await b.deliver(asked, _answer())  # the first entry, reclaimed by another replica
    finally:
        for replica in (a, b):
            await replica.application.shutdown()
    (reply,) = telegram.replies_to(GROUP_ID, 71)
    assert reply.text.startswith("Run deployctl rollback.")


def _wait_healthy(process: subprocess.Popen[str], base: str) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "tacit serve did not come up"
        time.sleep(0.2)


@pytest.mark.slow
def test_tacit_serve_registers_its_webhook_and_answers_what_telegram_posts(
    indexed_home: Path, telegram: FakeTelegram
) -> None:
    port = _free_port()
    secret = "serve-webhook-secret"
    public = "https://bot.example.com/telegram/webhook"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env |= {
        "TACIT_KB": "ops",
        "TACIT_TELEGRAM__BOT_TOKEN": TOKEN,
        "TACIT_TELEGRAM__API_URL": telegram.base_url,
        "TACIT_TELEGRAM__MODE": "webhook",
        "TACIT_TELEGRAM__WEBHOOK_SECRET": secret,
        "TACIT_TELEGRAM__WEBHOOK_URL": public,
        "TACIT_TELEGRAM__EDIT_INTERVAL": "0.1",
    }
    command = [sys.executable, "-m", "bot", "--home", str(indexed_home), "serve"]
    process = subprocess.Popen(
        [*command, "--port", str(port), "--json"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_healthy(process, base)
        (registered,) = telegram.wait_for("setWebhook")
        update = text_update("/ask How do I roll back a bad deploy?", message_id=77)
        forged = httpx.post(
            f"{base}/telegram/webhook", json=update, headers={SECRET_HEADER: "guess"}
        )
        posted = httpx.post(
            f"{base}/telegram/webhook", json=update, headers={SECRET_HEADER: secret}
        )
        again = httpx.post(f"{base}/telegram/webhook", json=update, headers={SECRET_HEADER: secret})
        deadline = time.monotonic() + 60
        while not any("deployctl rollback" in m.text for m in telegram.replies_to(GROUP_ID, 77)):
            assert time.monotonic() < deadline, telegram.replies_to(GROUP_ID, 77)
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr[-3000:]
    assert registered.params["url"] == public
    assert registered.params["secret_token"] == secret
    assert set(registered.params["allowed_updates"]) >= {"message", "callback_query"}
    assert forged.status_code in (401, 403)
    assert posted.status_code == 200 and again.status_code == 200
    assert telegram.calls_to("getUpdates") == []  # webhook mode never polls
    (answer,) = telegram.replies_to(GROUP_ID, 77)  # the redelivery was not answered again
    assert "deployctl rollback" in answer.text
    assert json.loads(stdout.strip().splitlines()[-1])["stopped"] is True
    assert TOKEN not in stderr and secret not in stderr


async def test_a_holder_that_cannot_reach_the_store_stops_before_its_lease_can_expire(
    tmp_path: Path,
) -> None:
    """Cut off from Redis, a poller cannot know whether another replica took over: it stops
    within two thirds of the TTL, before the lease could have passed to anyone."""
    lonely = await RedisStateStore.embedded(tmp_path / "cut.rdb")
    working = asyncio.Event()
    stopped = asyncio.Event()

    async def poll() -> None:
        working.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()

    lease = LeasedWork(lonely, "telegram:{1}:poller", poll, ttl=0.9, retry_every=0.1)
    lease.start()
    try:
        await asyncio.wait_for(working.wait(), 5)
        cut_at = time.monotonic()
        await lonely.aclose()  # the store is gone
        await asyncio.wait_for(stopped.wait(), 5)
        stopped_after = time.monotonic() - cut_at
    finally:
        await lease.stop()
    assert stopped_after < 0.9, stopped_after
    assert not lease.holding
