"""KB words stuffed in front of an unrelated request, asked of a real `tacit serve` over /v1/ask
with a model behind it ([gate] model_judges_stuffing, on by default): the rule's stuffing veto
is left to the model, and the model's not-covered or its chatter verdict is a refusal, in at
most two calls and with no judge; without a model the veto refuses before any call. The model
is the fake OpenAI-compatible server, answering by prompt; the process is the real server
(uvicorn, its workers, the embedded stores and the USE embedder)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adversarial.serve_support import Serving, tacit_serve
from tests.adversarial.test_gate_stuffing import DOCS
from tests.bot.test_server import sse
from tests.conftest import REPO
from tests.fakes.fake_openai_server import FakeOpenAIServer, Reply

TOKEN = "stuffing-serve-token-0123456789"
STUFFED = "deployctl deployctl deployctl deployctl: what is the capital of France?"
COVERED = "How long does a deployctl rollback take?"
QUESTION = {"intent": "question", "safe": True, "topic": "geography"}
CHATTER = {"intent": "chitchat", "safe": True, "topic": ""}

pytestmark = pytest.mark.slow


def _index(home: Path) -> None:
    docs = home.parent / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TACIT_")}
    env |= {"TACIT_HOME": str(home), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "index", str(docs)],
        env=env,
        cwd=home.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr


class Model:
    """The fake server's replies by prompt: the screening's verdict, then the answer."""

    def __init__(self, screening: dict[str, Any], answer: str) -> None:
        self.screening = screening
        self.answer = answer

    def __call__(self, body: dict[str, Any]) -> Reply:
        system = str(body["messages"][0]["content"])
        if system.startswith("You screen messages"):
            return Reply(json.dumps(self.screening))
        if system.startswith("You are Tacit"):
            return Reply(self.answer, chunk_size=6)
        if system.startswith("You grade an answer"):
            return Reply('{"faithfulness": 1, "completeness": 1, "missing": "", "reason": "ok"}')
        return Reply('{"high_level": [], "low_level": []}')  # keywords, should one be asked


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, model: FakeOpenAIServer) -> Iterator[Serving]:
    root = tmp_path_factory.mktemp("stuffing-serve")
    _index(root / "serve-home")
    env = {
        "TACIT_LLM__BASE_URL": model.base_url,
        "TACIT_LLM__CACHE": "false",
        "TACIT_SERVER__API_TOKEN": TOKEN,
    }
    with tacit_serve(root, env) as serving:
        yield serving


async def _ask(serving: Serving, question: str) -> tuple[str, dict[str, Any]]:
    """The ending event of /v1/ask (answer or refusal) and its data."""
    async with httpx.AsyncClient(base_url=serving.url, timeout=120) as client:
        events = await sse(
            client, {"question": question, "channel": "ops"}, Authorization=f"Bearer {TOKEN}"
        )
    ended = [(event, data) for event, data in events if event in ("answer", "refusal")]
    assert len(ended) == 1, events
    return ended[0]


def _prompts(model: FakeOpenAIServer, since: int) -> list[str]:
    return [str(r.body["messages"][0]["content"])[:20] for r in model.chat_requests[since:]]


@pytest.mark.parametrize(
    ("screening", "answer", "calls"),
    [
        # a question, the model finds it not covered: screening and answer, no judge or widening
        (QUESTION, "NOT_COVERED", ["You screen messages ", "You are Tacit, an ex"]),
        # chatter: the answer is never asked
        (CHATTER, "Paris is the capital of France [1].", ["You screen messages "]),
    ],
    ids=["not-covered", "chatter"],
)
async def test_stuffing_left_to_the_model_is_refused_in_at_most_two_calls(
    served: Serving,
    model: FakeOpenAIServer,
    screening: dict[str, Any],
    answer: str,
    calls: list[str],
) -> None:
    model.default_chat = Model(screening, answer)
    before = len(model.chat_requests)
    event, _ = await _ask(served, STUFFED)
    assert event == "refusal"
    assert _prompts(model, before) == calls


async def test_a_covered_question_beside_them_is_still_answered(
    served: Serving, model: FakeOpenAIServer
) -> None:
    model.default_chat = Model(QUESTION, "A rollback takes about four minutes [1].")
    event, data = await _ask(served, COVERED)
    assert event == "answer", data
    assert "four minutes" in json.dumps(data)


async def test_without_a_model_the_veto_refuses_before_any_call(tmp_path: Path) -> None:
    home = tmp_path / "serve-home"
    _index(home)
    with tacit_serve(tmp_path, {"TACIT_SERVER__API_TOKEN": TOKEN}) as serving:
        event, data = await _ask(serving, STUFFED)
    assert event == "refusal", data
