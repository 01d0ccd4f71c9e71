"""Slack's AI-app split view: when a user opens a thread with Tacit (`assistant_thread_started`)
it offers suggested prompts drawn from the knowledge base of the channel they were looking at;
the thread takes its title from its first question. (The running stage shows as the thread's
status while an answer is worked on: `_SlackReply`.)"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from core.conversation import Message
from core.errors import StoreError
from core.ports import StateStore

log = logging.getLogger(__name__)

ASSISTANT_THREAD_STARTED = "assistant_thread_started"
# (platform, workspace, channel) -> questions worth asking there, best first
SuggestPrompts = Callable[[str, str, str], Awaitable[list[str]]]

_PROMPTS = 4  # Slack shows at most four
_PROMPT_TITLE = 75  # characters of a prompt's title
_TITLE = 120  # characters of a thread title
_TITLED_TTL = 30 * 24 * 3600.0


async def offer_prompts(
    client: AsyncWebClient, body: dict[str, Any], event: dict[str, Any], suggest: SuggestPrompts
) -> None:
    """assistant.threads.setSuggestedPrompts for a new assistant thread."""
    thread = event.get("assistant_thread") or {}
    channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
    if not channel or not thread_ts:
        return
    context = thread.get("context") or {}
    team = body.get("team_id") or context.get("team_id") or ""
    # The channel the user was viewing when they opened the assistant, else the DM itself.
    about = context.get("channel_id") or channel
    try:
        questions = await suggest("slack", team, about)
    except StoreError as exc:
        log.warning("slack: no suggested prompts (%s)", exc)
        return
    prompts = [
        {"title": _shorten(q, _PROMPT_TITLE), "message": q} for q in questions[:_PROMPTS] if q
    ]
    if not prompts:
        return
    try:
        await client.assistant_threads_setSuggestedPrompts(
            channel_id=channel, thread_ts=thread_ts, title="Try asking", prompts=prompts
        )
    except SlackApiError as exc:
        log.info("slack: suggested prompts refused (%s)", exc.response.get("error"))


async def title_thread(client: AsyncWebClient, state: StateStore | None, message: Message) -> None:
    """Give an assistant thread (a thread in the DM with the app) its first question as title,
    once: the StateStore says whether any replica did already."""
    if not (message.direct and message.extra.get("in_thread") and message.thread):
        return
    if message.extra.get("kind") == "slash_command" or not message.text.strip():
        return
    key = f"slack:{{{message.workspace}:{message.channel}}}:titled:{message.thread}"
    try:
        if state is not None and not await state.set_if_absent(key, "1", ttl=_TITLED_TTL):
            return
    except StoreError as exc:
        log.info("slack: thread title skipped (%s)", exc)
        return
    try:
        await client.assistant_threads_setTitle(
            channel_id=message.channel,
            thread_ts=message.thread,
            title=_shorten(message.text.strip(), _TITLE),
        )
    except SlackApiError as exc:  # not an assistant thread, or no assistant:write
        log.info("slack: thread title refused (%s)", exc.response.get("error"))


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# --- App Home ---------------------------------------------------------------------------------

APP_HOME_OPENED = "app_home_opened"
# (platform, workspace, user) -> the facts to show (bot/chat_surfaces.HomeFacts)
HomeFactsOf = Callable[[str, str, str], Awaitable[dict[str, Any]]]


async def publish_home(
    client: AsyncWebClient,
    body: dict[str, Any],
    event: dict[str, Any],
    facts_of: HomeFactsOf,
    slash_command: str,
) -> None:
    """views.publish of the Home tab the user just opened (not the Messages tab)."""
    if event.get("tab", "home") != "home" or not event.get("user"):
        return
    user = str(event["user"])
    try:
        facts = await facts_of("slack", body.get("team_id", ""), user)
    except StoreError as exc:
        log.warning("slack: no App Home (%s)", exc)
        return
    view = {"type": "home", "blocks": home_blocks(facts, slash_command)}
    try:
        await client.views_publish(user_id=user, view=view)
    except SlackApiError as exc:
        log.info("slack: App Home refused (%s)", exc.response.get("error"))


def home_blocks(facts: dict[str, Any], slash_command: str) -> list[dict[str, Any]]:
    """The Home tab: what Tacit knows, how to ask, and (admins) each channel's mode and gate."""

    def section(text: str) -> dict[str, Any]:
        return {"type": "section", "text": {"type": "mrkdwn", "text": text[:3000]}}

    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": "What Tacit knows"}}
    ]
    for kb in facts.get("kbs", []):
        where = ", ".join(f"<#{c}>" for c in kb["channels"])
        if kb.get("default"):
            where = f"{where} and every other channel" if where else "every channel"
        indexed = (
            f"<!date^{int(kb['indexed_at'])}^{{date_short_pretty}} {{time}}|recently>"
            if kb.get("indexed_at")
            else "—"
        )
        blocks.append(
            section(
                f"*{kb['kb']}* · {kb['documents']} documents · last indexed {indexed}\n"
                f"Answers in: {where}"
            )
        )
    blocks += [
        {"type": "divider"},
        {"type": "header", "text": {"type": "plain_text", "text": "How to ask"}},
        section(
            "Mention me in a channel (`@Tacit how do I roll back?`), write to me here, or open "
            f"me from the top bar. I answer in the thread with my sources, and stay quiet on "
            f"what the documents do not cover. Admins: `{slash_command} stats`; on a thread "
            "people answered, ⋯ → *Remember in Tacit* adds it to the knowledge base."
        ),
    ]
    channels = facts.get("channels") or []
    if facts.get("admin"):
        blocks += [
            {"type": "divider"},
            {"type": "header", "text": {"type": "plain_text", "text": "Your channels"}},
        ]
        for channel in channels:
            outcomes = channel.get("outcomes", {})
            counted = " · ".join(f"{n} {name}" for name, n in sorted(outcomes.items())) or "none"
            state = "on" if channel.get("enabled") else "off"
            blocks.append(
                section(
                    f"<#{channel['channel']}> · KB *{channel['kb']}* · mode `{channel['mode']}` "
                    f"({state})\nDecisions: {counted} · 👍 {channel['helpful']} "
                    f"👎 {channel['unhelpful']}"
                )
            )
        if facts.get("console_url"):
            blocks.append(section(f"<{facts['console_url']}|Open the console>"))
    return blocks[:100]  # a view holds at most 100 blocks
