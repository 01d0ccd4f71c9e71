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

from bot.admission import Admission
from bot.cli_base import JsonOption, app, command, err, settings
from bot.local_endpoint import LocalEndpoint
from bot.queue import Deliver, Worker, default_consumer_name
from bot.readiness import Readiness, warm_up
from bot.runtime import Runtime, open_runtime
from bot.server import HttpResults, build_app, with_http_admins
from bot.settings import Settings
from bot.sources import start_source_scheduler
from bot.wiring import build_chat_adapters
from core.errors import ConfigError

if TYPE_CHECKING:
    from adapters.chat.common import ChatAdapter

logger = logging.getLogger("tacit.serve")


def platform_adapters(config: Settings, runtime: Runtime) -> dict[str, ChatAdapter]:
    """The chat platforms that have a bot token configured."""
    from bot.chat_surfaces import HomeFacts, SuggestedPrompts

    return build_chat_adapters(
        config,
        runtime.ingest.submit,
        runtime.assistant.record_feedback,
        runtime.store,
        # Slack's AI-app split view offers the channel's most asked questions.
        suggest_prompts=SuggestedPrompts(runtime.state, runtime.services.graph),
        # Slack's App Home: the KBs, how to ask, and for admins their channels' numbers and
        # a link to the console where `[console] public_url` names it.
        home_facts=HomeFacts(
            runtime.state,
            runtime.services.graph,
            config.conversation,
            default_kb=config.kb,
            console_url=(config.console.public_url or None) if config.console.enabled else None,
        ),
    )


class Service:
    """Everything `tacit serve` runs, with a lifespan that starts it and drains it."""

    def __init__(self, config: Settings, runtime: Runtime) -> None:
        self.config = config
        self.runtime = runtime
        self.platforms = platform_adapters(config, runtime)
        results = HttpResults(runtime.assistant)
        deliverers: dict[str, Deliver] = {"http": results.deliver, "cli": results.deliver}
        deliverers.update({name: a.deliver for name, a in self.platforms.items()})
        if runtime.assistant.memory is not None:  # a remembered thread cites the platform's link
            runtime.assistant.memory.links.update(
                {name: a.permalink for name, a in self.platforms.items()}
            )
        server = config.server
        # One budget of answers for the process: /v1/ask and the queue workers share it.
        self.admission = Admission(server.max_concurrent_asks, server.max_queued_asks)
        self.worker = Worker(
            runtime.queue,
            runtime.assistant,
            deliverers,
            consumer=server.consumer or default_consumer_name(),
            concurrency=server.workers,
            reclaim_idle=server.reclaim_idle,
            max_deliveries=server.max_deliveries,
            metrics=runtime.metrics,
            admission=self.admission,
        )
        self.left_pending = 0
        # not ready (/healthz 503) until each served KB answered its warm-up questions
        self.readiness = Readiness()
        routes = [route for a in self.platforms.values() for route in a.routes()]
        self.console: Any = None
        if config.console.enabled:  # the web console at /console (bot/console/)
            from bot.console import build_console, console_mount

            self.console = build_console(runtime)
            routes.append(console_mount(self.console))
        self.app = build_app(
            assistant=runtime.assistant,
            state=runtime.store,
            metrics=runtime.metrics,
            ingest=runtime.ingest,
            queue=runtime.queue,
            api_token=server.api_token.get_secret_value(),
            tokens=server.tokens,
            max_body_bytes=server.max_body_bytes,
            routes=routes,
            lifespan=self.lifespan,
            admission=self.admission,
            metrics_token=server.metrics_token.get_secret_value(),
            events_per_minute=server.events_per_minute,
            readiness=self.readiness,
        )

    async def warm(self) -> None:
        """Warm the served KBs (bot/readiness.py), then say so: /healthz and stderr."""
        readiness = await warm_up(self.runtime, self.readiness)
        failed = f" ({len(readiness.failed)} left cold: see the log)" if readiness.failed else ""
        err.print(
            f"tacit ready: warmed {', '.join(readiness.kbs) or 'nothing'} in "
            f"{readiness.seconds or 0:.1f}s{failed}"
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        await self.runtime.store.ping()  # fail fast (StoreUnavailable) before listening
        worker = asyncio.create_task(self.worker.run(), name="tacit-worker")
        refits = start_refits(self.runtime)  # [gate] refit_every (bot/gate_labels.py)
        # sources, the config's and the console's, synced by one replica (bot/sources.py)
        sources = start_source_scheduler(self.runtime)
        warming = asyncio.create_task(self.warm(), name="tacit-warm-up")
        started: list[ChatAdapter] = []
        try:
            for name, adapter in self.platforms.items():
                await adapter.start()
                started.append(adapter)
                logger.info("%s adapter started", name)
            yield
        finally:
            warming.cancel()
            await asyncio.gather(warming, return_exceptions=True)
            await sources.stop()  # a sync cut short resumes at the next one
            # Intake first (no new events), then the answers already accepted.
            for adapter in reversed(started):
                with contextlib.suppress(Exception):
                    await adapter.stop()
            self.left_pending = await self.worker.stop(self.config.server.drain_timeout)
            if refits is not None:
                refits.cancel()
            await asyncio.gather(worker, *([refits] if refits else []), return_exceptions=True)
            # Only now, with nothing left to deliver, close the platforms' clients.
            for adapter in self.platforms.values():
                with contextlib.suppress(Exception):
                    await adapter.aclose()
            if self.console is not None:  # its indexing jobs and background recounts
                from bot.console import close_console

                with contextlib.suppress(Exception):
                    await close_console(self.console)


def start_refits(runtime: Any) -> asyncio.Task[None] | None:
    """The gate's upkeep beside serving: at start, fit again each stored fit of an older
    format whose examples are remembered (an upgrade needs no `tacit gate fit`); then the
    scheduled refit of `[gate] refit_every` when it is on. None without a fitted-gate Gate."""
    from bot.gate_labels import migrate_stale_fits, refit_on_schedule
    from core.gate.gate import Gate

    every = runtime.settings.gate.refit_every
    gate = runtime.assistant.gate
    if not isinstance(gate, Gate):
        return None
    conversation = runtime.settings.conversation
    labels = runtime.assistant.labels

    def kbs() -> list[str]:
        named = [runtime.settings.kb, *conversation.kb_sources]
        named += [c.kb for c in conversation.channels.values() if c.kb]
        return [kb for kb in named if kb]

    async def upkeep() -> None:
        await migrate_stale_fits(gate=gate, labels=labels, kbs=kbs())
        if every > 0:
            await refit_on_schedule(gate=gate, labels=labels, kbs=kbs, every=every)

    return asyncio.create_task(upkeep(), name="tacit-gate-refit")


def uvicorn_config(app: Any, config: Settings, host: str, port: int) -> Any:
    """How uvicorn serves Tacit's app, for `tacit serve` and `tacit console` alike.

    proxy_headers is off: uvicorn would otherwise believe X-Forwarded-For (and -Proto) from
    127.0.0.1 and hand the app the address a local process names, so anything on the machine
    could pass for a `[console] trusted_proxies` proxy. Proxies are trusted in one place, the
    console's own check of the connecting peer (bot/console/auth.py).
    """
    import uvicorn

    from bot.http_protocol import connection_limits, guarded_protocol

    server = config.server
    limits = connection_limits(server.max_connections)
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_level=config.log_level.lower(),
        access_log=config.log_level == "DEBUG",
        timeout_graceful_shutdown=max(1, int(server.drain_timeout)),
        proxy_headers=False,
        # A deadline for each request's headers and a cap on open connections: a slow or
        # silent client cannot hold descriptors until none are left (bot/http_protocol.py).
        http=guarded_protocol(server.header_timeout, limits.max_connections),
        backlog=limits.backlog,
    )


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
    config = settings()
    bind_host = host or config.server.host
    bind_port = config.server.port if port is None else port
    if not (0 <= bind_port <= 65535):
        raise ConfigError(f"--port must be between 0 and 65535, not {bind_port}")
    # Admin tokens' users administer over HTTP; nobody else there does (bot.server).
    config = with_http_admins(config)
    async with open_runtime(config) as runtime:
        service = Service(config, runtime)
        server = _server(uvicorn_config(service.app, config, bind_host, bind_port))
        platforms = ", ".join(service.platforms) or "none"
        # `tacit ask`, `index`, `remove` and `doctor` on this home send their work here: the
        # embedded vector store admits no second process (bot/local_endpoint.py).
        local = LocalEndpoint(runtime)
        listening = await local.start()
        err.print(
            f"tacit serving on http://{bind_host}:{bind_port} (platforms: {platforms}; "
            f"consumer {service.worker.consumer}"
            + (f"; local commands at {local.path}" if listening else "")
            + ")"
        )
        try:
            await server.serve()
        finally:
            await local.aclose()
        if not server.started:
            raise ConfigError(f"could not serve on {bind_host}:{bind_port} (see the log above)")
    summary = {"stopped": True, "left_pending": service.left_pending, "platforms": platforms}
    if as_json:
        print(json.dumps(summary))
    else:
        err.print(f"stopped; {service.left_pending} answer(s) left queued for another replica")
