"""A real `tacit serve` (its own process, a fresh data home with a small indexed KB) and a
headless Debian chromium driven by Playwright, for the console's browser tests.

Screenshots go to $TACIT_ARTIFACTS/console (CI keeps that folder), else to pytest's temp dir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adversarial.serve_support import serve_process

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN = "console-test-token"
DEMO_DOCS = ("runbook-bad-deploy-rollback.md", "faq.md", "glossary.md")
HUB_KB = "synthetic"  # tests/browser/synthetic_graph.py: a hub with HUB_NEIGHBOURS neighbours

if CHROMIUM is None:
    pytest.skip(
        "no chromium on this machine (apt-get install -y chromium; CI installs it)",
        allow_module_level=True,
    )


@dataclass
class Served:
    url: str
    home: Path
    log: Path

    def page_url(self, path: str = "") -> str:
        return f"{self.url}/console/{path}"


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env.update(
        TACIT_HOME=str(home),
        TACIT_CONSOLE__ADMIN_TOKEN=TOKEN,
        TACIT_LOG_LEVEL="WARNING",
        # A channel bound to the KB, to ask as from the playground.
        TACIT_CONVERSATION__CHANNELS='{"http::ops": {"kb": "default", "mode": "mention"}}',
    )
    return env


def demo_home(base: Path) -> tuple[Path, dict[str, str]]:
    """A data home under `base` with the demo KB indexed as `default`, and the environment that
    names it: each module's own `tacit serve` starts from one."""
    home, docs = base / "home", base / "docs"
    docs.mkdir()
    for name in DEMO_DOCS:
        shutil.copy(REPO / "bot" / "demo_kb" / name, docs / name)
    env = _env(home)
    subprocess.run(
        [sys.executable, "-m", "bot", "index", str(docs), "--kb", "default", "--json"],
        env=env,
        cwd=base,
        check=True,
        capture_output=True,
        timeout=600,
    )
    return home, env


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    base = tmp_path_factory.mktemp("console")
    home, env = demo_home(base)
    # A KB whose hub has HUB_NEIGHBOURS neighbours, for the graph view's paging.
    subprocess.run(
        [sys.executable, "-m", "tests.browser.synthetic_graph", str(home), HUB_KB],
        env=env,
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=300,
    )
    log = base / "serve.log"
    with serve_process(env, base, log) as (port, _):
        url = f"http://127.0.0.1:{port}"
        # Decisions to look at: an answered question and a message the gate turns down.
        for question in ("How do I roll back a bad deploy?", "lol nice weekend everyone"):
            with httpx.stream(
                "POST",
                f"{url}/v1/ask",
                json={"question": question, "channel": "ops"},
                timeout=120,
            ) as response:
                for _ in response.iter_lines():
                    pass
        yield Served(url, home, log)


@pytest.fixture(scope="session")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    named = os.environ.get("TACIT_ARTIFACTS")
    folder = Path(named) / "console" if named else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# Module scope, not session: Playwright's sync API keeps an asyncio loop running in this thread
# while it is open, and every async test after it would then fail with "Runner.run() cannot be
# called from a running event loop".
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def page(browser: Any, served: Served) -> Iterator[Any]:
    """A fresh browser context (no cookies), its console errors collected in `page.errors`."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.errors = errors
    try:
        yield page
    finally:
        context.close()


def log_in(page: Any, served: Served) -> None:
    page.goto(served.page_url())
    page.fill("#token", TOKEN)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(served.page_url())


@pytest.fixture
def admin(page: Any, served: Served) -> Any:
    log_in(page, served)
    return page
