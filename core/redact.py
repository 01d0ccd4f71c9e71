"""The one URL redactor: credentials written into a URL never reach a message, a log line or
`tacit config show`.

A URL can carry a secret in two places: the userinfo (`redis://:pw@host`, `https://user:pw@host`)
and the query string (`?key=…` for Gemini-style endpoints, `?password=…` for Redis unix
sockets, `?token=…`, signed URLs' `?sig=…`). The password of the userinfo and the value of every
query parameter whose name looks like a credential become `***`; the user name, host, path and
the other parameters stay, so the URL still says where it points.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlsplit

MASK = "***"

# A query parameter named like one of these holds a credential (matched anywhere in the name,
# case-insensitively: api_key, X-Amz-Signature, access_token, client_secret, passwd, auth…).
_CREDENTIAL_NAME = re.compile(r"key|pass|pwd|token|secret|sig|auth|cred|session", re.IGNORECASE)
# A URL inside free text: a scheme, "://", then everything up to whitespace or a quote/bracket.
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]+")


def redact_url(url: str) -> str:
    """The URL with its userinfo password and credential-like query values replaced by ***."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user, has_password, _ = userinfo.partition(":")
            netloc = f"{user}:{MASK}@{host}" if has_password else netloc
        query = parts.query
        if query:
            pairs = parse_qsl(query, keep_blank_values=True)
            if any(_CREDENTIAL_NAME.search(name) for name, _ in pairs):
                query = "&".join(
                    f"{quote(name, safe='')}="
                    + (MASK if _CREDENTIAL_NAME.search(name) else quote(value, safe="/:"))
                    for name, value in pairs
                )
        if netloc == parts.netloc and query == parts.query:
            return url
        # Rebuilt by hand: urlunsplit drops the empty authority of unix:///path.
        rebuilt = f"{parts.scheme}://{netloc}{parts.path}" if parts.scheme else netloc + parts.path
        rebuilt += f"?{query}" if query else ""
        return rebuilt + (f"#{parts.fragment}" if parts.fragment else "")
    except ValueError:
        # An unparseable URL may still carry a secret: show only its scheme.
        return url.split(":", 1)[0] + f"://{MASK}"


def redact_optional_url(url: str | None) -> str | None:
    return None if url is None else redact_url(url)


def redact_urls_in_text(text: str) -> str:
    """Every URL inside `text` (an error message, a log line) redacted."""
    return _URL_IN_TEXT.sub(lambda found: redact_url(found.group(0)), text)
