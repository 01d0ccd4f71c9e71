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
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bot.cli_base import JsonOption, app, command, err, settings
from bot.queue import Deliver, Worker, default_consumer_name
from bot.runtime import Runtime, open_runtime
from bot.server import HttpResults, build_app
from bot.settings import Settings
from bot.wiring import build_chat_adapters
from core.errors import ConfigError

if TYPE_CHECKING:
    from adapters.chat.common import ChatAdapter

logger = logging.getLogger("tacit.serve")


def platform_adapters(config: Settings, runtime: Runtime) -> dict[str, ChatAdapter]:
    """The chat platforms that have a bot token configured."""
    return build_chat_adapters(config, runtime.ingest.submit, runtime.assistant.record_feedback)


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
        started: list[ChatAdapter] = []
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
            # Only now, with nothing left to deliver, close the platforms' clients.
            for adapter in self.platforms.values():
                with contextlib.suppress(Exception):
                    await adapter.aclose()


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
