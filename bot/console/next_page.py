"""Where to send an admin after logging in: back to the console page they were on.

The page comes from the request (`?next=`), so it is an open redirect unless checked: only a
path of this console is followed (`/console/...`, no scheme, no host, no `//` or `\\` a
browser reads as another host, no `..`, no control characters); anything else goes to the
overview.
"""

from __future__ import annotations

from urllib.parse import unquote, urlencode, urlsplit

HOME = "/console/"
MAX_NEXT = 2000  # characters: a longer one is no page of the console


def safe_next(raw: object) -> str:
    """`raw` when it is a page of this console, else the overview."""
    if not isinstance(raw, str) or not raw or len(raw) > MAX_NEXT:
        return HOME
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in raw) or "\\" in raw:
        return HOME
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or not raw.startswith("/console/") or raw.startswith("//"):
        return HOME
    if ".." in unquote(parts.path).split("/") or parts.path.startswith("/console/login"):
        return HOME
    return raw


def login_url(next_page: str = "") -> str:
    """The login page, naming the page to come back to (none for the overview)."""
    target = safe_next(next_page)
    return "/console/login" if target == HOME else f"/console/login?{urlencode({'next': target})}"
