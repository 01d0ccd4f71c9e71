"""Oversized request bodies against `tacit serve`'s app: how many bytes each
route pulls before its 413, and how much the process grows, for a body far over the limit.

Two measurements per route:
- ASGI: the app is called directly with a body made chunk by chunk (64 KiB) as the app asks for
  it; "pulled" counts what the app took, i.e. what any server would have had to hold for it.
- HTTP: the same body chunked (no Content-Length) over real HTTP to uvicorn on 127.0.0.1; the
  process's RSS growth and the time until the connection ended.

Baseline, same run: a route that reads with Starlette's `request.body()` and checks the size
afterwards (what /v1/* did before), over the same HTTP path.

    python bench/bench_body_cap.py                 # 400 MB bodies, 1 MiB limit
    python bench/bench_body_cap.py --mb 100
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from adapters.chat.telegram import SECRET_HEADER
from bench import results as results_md
from tests.adversarial.http_support import (
    ALICE_TOKEN,
    TELEGRAM_SECRET,
    bearer,
    call_asgi,
    endless,
    tacit_app,
)
from tests.fakes.fake_slack import FakeSlack
from tests.fakes.fake_telegram import FakeTelegram
from tests.fakes.loopback_server import serving

LIMIT = 1024 * 1024
CHUNK = 64 * 1024


def _whole_body_then_check() -> Starlette:
    """The baseline: read everything, then compare with the limit."""

    async def route(request: Request) -> Response:
        body = await request.body()
        if len(body) > LIMIT:
            return JSONResponse({"error": "too large"}, status_code=413)
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/v1/ask", route, methods=["POST"])])


@dataclass(frozen=True)
class OverHttp:
    outcome: str
    grown_mb: float
    seconds: float

    def __str__(self) -> str:
        return f"{self.outcome}, peak RSS +{self.grown_mb:.1f} MB, {self.seconds:.2f} s"


async def _over_http(app: Any, path: str, headers: dict[str, str], total: int) -> OverHttp:
    process = psutil.Process()

    async def body() -> AsyncIterator[bytes]:
        chunk = b"x" * CHUNK
        for _ in range(total // CHUNK):
            yield chunk

    peak = 0

    async def sample() -> None:  # the peak, not the end: a read body is freed after the 413
        nonlocal peak
        while True:
            peak = max(peak, process.memory_info().rss)
            await asyncio.sleep(0.005)

    async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=300) as client:
        before = process.memory_info().rss
        sampler = asyncio.create_task(sample())
        started = time.perf_counter()
        try:
            outcome = str((await client.post(path, content=body(), headers=headers)).status_code)
        except httpx.HTTPError as exc:  # the server closed the connection after its 413
            outcome = f"closed ({type(exc).__name__})"
        seconds = time.perf_counter() - started
        sampler.cancel()
        grown = (max(peak, process.memory_info().rss) - before) / 2**20
    return OverHttp(outcome, grown, seconds)


async def main(megabytes: int, run_md: results_md.Run) -> None:
    total = megabytes * 1024 * 1024
    print(f"body {megabytes} MB in {CHUNK // 1024} KiB chunks, limit {LIMIT} bytes")
    with FakeSlack() as slack, FakeTelegram() as telegram:
        async with tacit_app(
            Path(tempfile.mkdtemp()),
            slack_api=slack.api_url,
            telegram=telegram,
            max_body_bytes=LIMIT,
        ) as served:
            routes = [
                ("/v1/ask", bearer(ALICE_TOKEN)),
                ("/slack/events", {}),
                ("/telegram/webhook", {SECRET_HEADER: TELEGRAM_SECRET}),
            ]
            for path, headers in routes:
                reply = await call_asgi(served.app, path, endless(CHUNK, total), headers)
                print(
                    f"ASGI {path}: {reply.status}, pulled {reply.pulled} bytes "
                    f"(limit + {reply.pulled - LIMIT})"
                )
            over_http = {}
            for path, headers in routes:
                over_http[path] = await _over_http(served.app, path, headers, total)
                print(f"HTTP {path}: {over_http[path]}")
    baseline = await _over_http(_whole_body_then_check(), "/v1/ask", {}, total)
    print(f"HTTP baseline (request.body() then check): {baseline}")
    run_md.write(
        results_md.Row(
            f"{path}: peak RSS growth, {megabytes} MB body",
            round(measured.grown_mb, 1),
            baseline=round(baseline.grown_mb, 1),
            unit="MB",
            notes=f"{measured.outcome}; baseline: request.body() then check",
        )
        for path, measured in over_http.items()
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=400, help="body size in MB")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    asyncio.run(main(args.mb, results_md.Run.start(__file__, enabled=not args.no_results)))
