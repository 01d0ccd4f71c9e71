"""`tacit serve`: the HTTP app, the configured chat platforms and the queue workers, in one
asyncio process.

Start: stores → platform adapters (Telegram's lifecycle driven here: initialize/start, not
run_polling) → workers → HTTP. Stop (SIGINT/SIGTERM): uvicorn stops accepting requests and
finishes those open, then the lifespan stops the platforms' intake and drains the answers in
flight for up to `server.drain_timeout` seconds; what is left stays queued for another replica
(or this one, restarted) to take.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any, Protocol

import typer

from bot.cli_base import JsonOption, app, command, err, settings
from bot.queue import Deliver, Worker, default_consumer_name
from bot.runtime import Runtime, open_runtime
from bot.server import HttpResults, build_app
from bot.settings import Settings
from core.conversation import Message, ReplyEvent
from core.errors import ConfigError

logger = logging.getLogger("tacit.serve")


class PlatformAdapter(Protocol):
    def routes(self) -> Sequence[Any]: ...
    async def start(self) -> None: ...
    async def stop(self) -> None: ...
    async def deliver(self, message: Message, events: AsyncIterator[ReplyEvent]) -> None: ...


def platform_adapters(config: Settings, runtime: Runtime) -> dict[str, PlatformAdapter]:
    """The chat platforms that have a bot token configured."""
    adapters: dict[str, PlatformAdapter] = {}
    submit, feedback = runtime.ingest.submit, runtime.assistant.record_feedback
    if config.slack.configured:
        from adapters.chat.slack import SlackAdapter

        slack = config.slack
        adapters["slack"] = SlackAdapter(
            bot_token=slack.bot_token.get_secret_value(),
            submit=submit,
            feedback=feedback,
            signing_secret=slack.signing_secret.get_secret_value(),
            app_token=slack.app_token.get_secret_value() if slack.mode == "socket" else "",
            api_url=slack.api_url,
            bot_user_id=slack.bot_user_id,
            stream_interval=slack.stream_interval,
            max_retries=slack.max_retries,
            slash_command=slack.slash_command,
        )
    if config.telegram.configured:
        from adapters.chat.telegram import TelegramAdapter

        telegram = config.telegram
        adapters["telegram"] = TelegramAdapter(
            bot_token=telegram.bot_token.get_secret_value(),
            submit=submit,
            feedback=feedback,
            mode=telegram.mode,
            webhook_secret=telegram.webhook_secret.get_secret_value(),
            webhook_url=telegram.webhook_url or "",
            api_url=telegram.api_url,
            edit_interval=telegram.edit_interval,
            typing_interval=telegram.typing_interval,
            concurrent_updates=telegram.concurrent_updates,
            max_retries=telegram.max_retries,
        )
    return adapters


class Service:
    """Everything `tacit serve` runs, with a lifespan that starts it and drains it."""

    def __init__(self, config: Settings, runtime: Runtime) -> None:
        self.config = config
        self.runtime = runtime
        self.platforms = platform_adapters(config, runtime)
        results = HttpResults(runtime.assistant)
        deliverers: dict[str, Deliver] = {"http": results.deliver, "cli": results.deliver}
        deliverers.update({name: a.deliver for name, a in self.platforms.items()})
        server = config.server
        self.worker = Worker(
            runtime.queue,
            runtime.assistant,
            deliverers,
            consumer=server.consumer or default_consumer_name(),
            concurrency=server.workers,
            reclaim_idle=server.reclaim_idle,
            max_deliveries=server.max_deliveries,
            metrics=runtime.metrics,
        )
        self.left_pending = 0
        routes = [route for a in self.platforms.values() for route in a.routes()]
        self.app = build_app(
            assistant=runtime.assistant,
            state=runtime.store,
            metrics=runtime.metrics,
            ingest=runtime.ingest,
            queue=runtime.queue,
            api_token=server.api_token.get_secret_value(),
            routes=routes,
            lifespan=self.lifespan,
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        await self.runtime.store.ping()  # fail fast (StoreUnavailable) before listening
        worker = asyncio.create_task(self.worker.run(), name="tacit-worker")
        started: list[PlatformAdapter] = []
        try:
            for name, adapter in self.platforms.items():
                await adapter.start()
                started.append(adapter)
                logger.info("%s adapter started", name)
            yield
        finally:
            # Intake first (no new events), then the answers already accepted.
            for adapter in reversed(started):
                with contextlib.suppress(Exception):
                    await adapter.stop()
            self.left_pending = await self.worker.stop(self.config.server.drain_timeout)
            await asyncio.gather(worker, return_exceptions=True)


def _server(config: Any) -> Any:
    """A uvicorn Server that turns SIGINT/SIGTERM into a graceful stop and then returns.

    uvicorn's own handling re-raises the signal once serving ends, which would kill the process
    before the stores are closed (an embedded redis-server would be orphaned) and before the
    summary is printed. A second signal still forces the exit.
    """
    import signal

    import uvicorn

    class GracefulServer(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Any:
            loop = asyncio.get_running_loop()
            signals = (signal.SIGINT, signal.SIGTERM)
            for sig in signals:
                loop.add_signal_handler(sig, self.handle_exit, sig, None)
            try:
                yield
            finally:
                for sig in signals:
                    loop.remove_signal_handler(sig)

    return GracefulServer(config)


@app.command()
@command
async def serve(
    host: Annotated[str | None, typer.Option("--host", help="Listen address.")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Listen port (0: any free).")] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the bot: HTTP API, Slack and Telegram (when configured) and the answer workers."""
    import uvicorn

    config = settings()
    bind_host = host or config.server.host
    bind_port = config.server.port if port is None else port
    if not (0 <= bind_port <= 65535):
        raise ConfigError(f"--port must be between 0 and 65535, not {bind_port}")
    async with open_runtime(config) as runtime:
        service = Service(config, runtime)
        server = _server(
            uvicorn.Config(
                service.app,
                host=bind_host,
                port=bind_port,
                lifespan="on",
                log_level=config.log_level.lower(),
                access_log=config.log_level == "DEBUG",
                timeout_graceful_shutdown=max(1, int(config.server.drain_timeout)),
            )
        )
        platforms = ", ".join(service.platforms) or "none"
        err.print(
            f"tacit serving on http://{bind_host}:{bind_port} (platforms: {platforms}; "
            f"consumer {service.worker.consumer})"
        )
        await server.serve()
        if not server.started:
            raise ConfigError(f"could not serve on {bind_host}:{bind_port} (see the log above)")
    summary = {"stopped": True, "left_pending": service.left_pending, "platforms": platforms}
    if as_json:
        print(json.dumps(summary))
    else:
        err.print(f"stopped; {service.left_pending} answer(s) left queued for another replica")
