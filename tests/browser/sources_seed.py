"""Candidates written straight into a data home's state store before `tacit serve` starts, for
the Sources page's browser test (a real chat would take a Slack or Telegram to propose them).

    python -m tests.browser.sources_seed ID:KB ...   (settings from TACIT_* and TACIT_CONFIG)
"""

from __future__ import annotations

import asyncio
import sys
import time

from bot.candidates import Candidate, CandidateStore


def seeded(cid: str, kb: str) -> Candidate:
    return Candidate(
        id=cid,
        kb=kb,
        thread=f"slack:T1:C1:{cid}",
        channel="slack:T1:C1",
        platform="slack",
        link=f"https://acme.slack.com/archives/C1/p{cid}",
        question={
            "id": "1.0",
            "user": "UASK",
            "name": "Ann",
            "text": f"How do I rotate the quasar spool ({cid})? <script>alert(1)</script>",
            "at": 1.0,
        },
        replies=[
            {
                "id": "2.0",
                "user": "UANS",
                "name": "Bo",
                "text": "Run quasarctl spool rotate --force, then raise the segments to 12.",
                "at": 2.0,
            }
        ],
        proposed_at=time.time(),
    )


async def seed(pairs: list[str]) -> None:
    from bot.settings import load_settings
    from bot.wiring import build_state

    settings = load_settings()
    store = await build_state(settings)
    try:
        waiting = CandidateStore(store, ttl=settings.conversation.candidates_ttl)
        for pair in pairs:
            cid, kb = pair.split(":", 1)
            await waiting.put(seeded(cid, kb), new=True)
    finally:
        await store.aclose()  # the embedded server saves its data as it stops


if __name__ == "__main__":
    asyncio.run(seed(sys.argv[1:]))
