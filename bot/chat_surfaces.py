"""What the chat platforms' own surfaces show about the knowledge bases: the suggested prompts
of Slack's AI-app split view (the channel's most asked questions that Tacit answered, from the
decision log, topped up with the KB's document titles) and the facts of its App Home tab."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from bot.conversation_state import ConversationState
from bot.settings import ConversationSettings
from core.ports import GraphStore

_SPACE = re.compile(r"\s+")


class SuggestedPrompts:
    def __init__(self, state: ConversationState, graph: GraphStore, *, limit: int = 4) -> None:
        self._state = state
        self._graph = graph
        self._limit = limit

    async def __call__(self, platform: str, workspace: str, channel: str) -> list[str]:
        """Up to `limit` questions to offer in this channel, most asked first."""
        config = await self._state.channel(platform, workspace, channel)
        counts: Counter[str] = Counter()
        first_wording: dict[str, str] = {}
        for decision in await self._state.decisions(platform, workspace, channel, 1000):
            text = _SPACE.sub(" ", str(decision.get("text") or "")).strip()
            if decision.get("outcome") != "answered" or not text or text.startswith("/"):
                continue
            key = text.lower().rstrip("?？!. ")
            counts[key] += 1
            first_wording.setdefault(key, text)
        prompts = [first_wording[key] for key, _ in counts.most_common(self._limit)]
        if len(prompts) < self._limit:
            documents = await self._graph.get_documents(config.kb)
            titles = sorted({d.title.strip() for d in documents if d.title.strip()})
            prompts += [f"What does “{title}” cover?" for title in titles]
        return prompts[: self._limit]


class HomeFacts:
    """What Slack's App Home tab shows a user: each knowledge base with the channels bound to
    it, its documents and when it was last indexed; and, for admins, each configured channel's
    mode and the gate's numbers (decisions by outcome, 👍/👎)."""

    def __init__(
        self,
        state: ConversationState,
        graph: GraphStore,
        settings: ConversationSettings,
        *,
        default_kb: str,
        console_url: str | None = None,
    ) -> None:
        self._state = state
        self._graph = graph
        self._settings = settings
        self._default_kb = default_kb
        self._console_url = console_url

    async def __call__(self, platform: str, workspace: str, user: str) -> dict[str, Any]:
        from bot.console.overview import indexed_key

        prefix = f"{platform}:{workspace}:"
        bound = {
            key.removeprefix(prefix): channel
            for key, channel in self._settings.channels.items()
            if key.startswith(prefix)
        }
        by_kb: dict[str, list[str]] = {self._default_kb: []}
        for channel_id, channel in bound.items():
            by_kb.setdefault(channel.kb or self._default_kb, []).append(channel_id)
        kbs: list[dict[str, Any]] = []
        for kb, kb_channels in sorted(by_kb.items()):
            stats = await self._graph.stats(kb)
            raw = await self._state.store.get(indexed_key(kb))
            kbs.append(
                {
                    "kb": kb,
                    "channels": sorted(kb_channels),
                    "default": kb == self._default_kb,
                    "documents": stats.documents,
                    "indexed_at": (json.loads(raw) or {}).get("at") if raw else None,
                }
            )
        admin_everywhere = f"{platform}:{user}" in self._settings.admins
        channels: list[dict[str, Any]] = []
        for channel_id, channel in sorted(bound.items()):
            if not (admin_everywhere or user in channel.admins):
                continue
            config = await self._state.channel(platform, workspace, channel_id)
            outcomes = Counter(
                str(d.get("outcome"))
                for d in await self._state.decisions(platform, workspace, channel_id, 1000)
            )
            votes = await self._state.feedback_summary(platform, workspace, channel_id)
            channels.append(
                {
                    "channel": channel_id,
                    "kb": config.kb,
                    "mode": config.mode,
                    "enabled": config.enabled,
                    "outcomes": dict(outcomes),
                    "helpful": int(votes.get("helpful", 0)),
                    "unhelpful": int(votes.get("unhelpful", 0)),
                }
            )
        return {
            "kbs": kbs,
            "admin": admin_everywhere or bool(channels),
            "channels": channels,
            "console_url": self._console_url if (admin_everywhere or channels) else None,
        }
