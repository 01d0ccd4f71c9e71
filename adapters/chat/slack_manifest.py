"""What the Slack app must be granted, and its app manifest (`tacit slack manifest`).

The events the adapter listens to, the Web API methods it calls and the scope each needs live
here, and the adapter registers its listeners from the same names: the manifest a workspace
admin pastes is generated from what the code does (tests/adapters/chat/test_slack_manifest.py
fails when a new call or event is not accounted for).
"""

from __future__ import annotations

from typing import Any

from adapters.chat.slack_assistant import APP_HOME_OPENED, ASSISTANT_THREAD_STARTED
from adapters.chat.slack_stream import FEEDBACK_BUTTONS_ACTION

EVENTS_PATH = "/slack/events"
MENTION_EVENT = "app_mention"
MESSAGE_EVENT = "message"  # one listener: Slack sends every message.* subscription as "message"
# The message shortcut ("⋯ → Remember in Tacit" on any message of a thread): /tacit remember for
# that thread — a slash command cannot, as Slack does not say which thread it was typed in.
REMEMBER_SHORTCUT = "tacit_remember"

# Each event subscription with the scope that lets the app receive it.
EVENT_SCOPES: dict[str, str | None] = {
    MENTION_EVENT: "app_mentions:read",
    "message.channels": "channels:history",  # public channels the bot is in
    "message.groups": "groups:history",  # private channels
    "message.im": "im:history",  # direct messages
    ASSISTANT_THREAD_STARTED: "assistant:write",  # the AI-app split view: suggested prompts
    APP_HOME_OPENED: None,  # the Home tab, published with views.publish
}
# Each Web API method the adapter calls, with its scope (None: any token may call it).
METHOD_SCOPES: dict[str, str | None] = {
    "auth.test": None,
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.delete": "chat:write",
    "chat.getPermalink": None,  # a remembered thread's link (/tacit remember)
    "chat.startStream": "chat:write",
    "chat.appendStream": "chat:write",
    "chat.stopStream": "chat:write",
    "assistant.threads.setStatus": "assistant:write",
    "assistant.threads.setSuggestedPrompts": "assistant:write",
    "assistant.threads.setTitle": "assistant:write",
    "views.publish": None,
    "apps.connections.open": None,  # Socket Mode, with the app-level token (connections:write)
}
SLASH_COMMAND_SCOPE = "commands"
FEEDBACK_ACTIONS = ("tacit_feedback_up", "tacit_feedback_down", FEEDBACK_BUTTONS_ACTION)


def bot_scopes() -> list[str]:
    scopes = {scope for scope in EVENT_SCOPES.values() if scope is not None}
    scopes.add(SLASH_COMMAND_SCOPE)
    scopes |= {scope for scope in METHOD_SCOPES.values() if scope is not None}
    return sorted(scopes)


def manifest(
    *,
    url: str | None,
    socket_mode: bool,
    slash_command: str,
    name: str = "Tacit",
) -> dict[str, Any]:
    """The app manifest (Slack's schema). `url` is the public origin serving /slack/events;
    Socket Mode needs none (events come over the app-level token's websocket)."""
    if not socket_mode and not url:
        raise ValueError("the HTTP Events API needs the public URL of the server")
    endpoint = url.rstrip("/") + EVENTS_PATH if url and not socket_mode else None
    command: dict[str, Any] = {
        "command": slash_command,
        "description": f"Ask {name}, or run an admin command",
        "usage_hint": "[question] | mode [mention|auto|on|off] | stats | feedback | reindex | "
        "remember <thread link> | forget <thread link>",
        "should_escape": False,
    }
    events: dict[str, Any] = {"bot_events": sorted(EVENT_SCOPES)}
    interactivity: dict[str, Any] = {"is_enabled": True}
    if endpoint is not None:
        command["url"] = endpoint
        events["request_url"] = endpoint
        interactivity["request_url"] = endpoint
    return {
        "display_information": {
            "name": name,
            "description": "Answers your team's questions from its own documents, with sources.",
            "background_color": "#2c2d30",
        },
        "features": {
            "app_home": {
                "home_tab_enabled": True,
                "messages_tab_enabled": True,
                "messages_tab_read_only_enabled": False,
            },
            # The AI-app split view; assistant.threads.setStatus (assistant:write) needs it.
            "assistant_view": {
                "assistant_description": f"Ask {name} about your team's runbooks and documents.",
            },
            "bot_user": {"display_name": name, "always_online": True},
            "slash_commands": [command],
            "shortcuts": [
                {
                    "name": f"Remember in {name}"[:24],
                    "type": "message",
                    "callback_id": REMEMBER_SHORTCUT,
                    "description": "Keep this thread's question and answer in the knowledge base",
                }
            ],
        },
        "oauth_config": {"scopes": {"bot": bot_scopes()}},
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "org_deploy_enabled": False,
            "socket_mode_enabled": socket_mode,
            "token_rotation_enabled": False,
        },
    }
