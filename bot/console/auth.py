"""Who may use the console, and proof that an action came from the console's own pages.

Login: `[console] admin_token` typed into the login form, or the user header of a trusted
reverse proxy (`trusted_user_header`, honoured only when the connecting peer is in
`trusted_proxies`: anyone else could send that header). Either opens a session: a random id in
an HttpOnly, SameSite=Strict cookie (Secure over https), the session itself in the StateStore
so every replica knows it.

A token session is bound to the admin_token it was opened with: after the token is changed
(rotated because it leaked, say) every session it opened is refused. Failed token logins are
counted per client: past LOGIN_FAILURES in a LOGIN_WINDOW, that client's logins are refused
(429) until the window ends, the right token included, so guessing cannot go on.

Actions (every method but GET/HEAD) need both a session's CSRF token (a form field or the
X-CSRF-Token header htmx sends) and an Origin — or, without one, a Referer — naming this very
site. The login form, which has no session yet, needs the Origin check alone.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import math
import secrets
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from bot.settings import ConsoleSettings
from core.ports import StateStore

COOKIE = "tacit_console"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf"
SAFE_METHODS = frozenset({"GET", "HEAD"})
LOGIN_FAILURES = 10  # failed token logins one client may make per window
LOGIN_WINDOW = 300.0  # seconds


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    user: str
    csrf: str
    via: str  # "token" or "proxy"
    created: float


def _session_key(session_id: str) -> str:
    return f"console:{{session:{session_id}}}"


class ConsoleAuth:
    def __init__(self, store: StateStore, settings: ConsoleSettings) -> None:
        self.store = store
        self.settings = settings
        self._proxies = [ipaddress.ip_network(p, strict=False) for p in settings.trusted_proxies]

    def token_id(self) -> str:
        """Which admin_token is current, without the token: the sessions it opened carry it."""
        token = self.settings.admin_token.get_secret_value().encode()
        return hmac.new(token, b"tacit console session", hashlib.sha256).hexdigest()[:32]

    def client_key(self, request: Request) -> str:
        """Who is logging in, for the throttle: the peer, or the address a trusted proxy
        names for it (behind a proxy every client would otherwise share its address)."""
        peer = request.client.host if request.client else "?"
        if self.from_trusted_proxy(request):
            forwarded = request.headers.get("x-forwarded-for", "").split(",")[-1].strip()
            peer = forwarded[:64] or peer
        return peer

    def _failures_key(self, request: Request, now: float) -> tuple[str, int]:
        window = int(now // LOGIN_WINDOW)
        return f"console:{{login:{self.client_key(request)}}}:{window}", window

    async def login_wait(self, request: Request) -> int | None:
        """None while this client may try to log in; else the seconds until it may again."""
        now = time.time()
        key, window = self._failures_key(request, now)
        failures = int(await self.store.get(key) or 0)
        if failures < LOGIN_FAILURES:
            return None
        return max(1, math.ceil((window + 1) * LOGIN_WINDOW - now))

    async def login_failed(self, request: Request) -> None:
        key, _ = self._failures_key(request, time.time())
        await self.store.incr(key, ttl=LOGIN_WINDOW)

    @property
    def token_login(self) -> bool:
        return bool(self.settings.admin_token.get_secret_value())

    def token_matches(self, given: str) -> bool:
        token = self.settings.admin_token.get_secret_value()
        return bool(token) and hmac.compare_digest(given.encode(), token.encode())

    def from_trusted_proxy(self, request: Request) -> bool:
        if not self._proxies or request.client is None:
            return False
        try:
            peer = ipaddress.ip_address(request.client.host)
        except ValueError:
            return False
        return any(peer in network for network in self._proxies)

    def proxy_user(self, request: Request) -> str | None:
        """The user a trusted proxy names (None: no trusted proxy, or no such header)."""
        header = self.settings.trusted_user_header
        if not header or not self.from_trusted_proxy(request):
            return None
        user = request.headers.get(header, "").strip()
        return user[:200] or None

    async def open(self, user: str, via: str) -> Session:
        session = Session(
            secrets.token_urlsafe(32), user, secrets.token_urlsafe(32), via, time.time()
        )
        await self.store.set(
            _session_key(session.id),
            json.dumps(
                {
                    "user": user,
                    "csrf": session.csrf,
                    "via": via,
                    "created": session.created,
                    # a token session lives only as long as its token (see session())
                    **({"token": self.token_id()} if via == "token" else {}),
                }
            ),
            ttl=self.settings.session_ttl,
        )
        return session

    async def session(self, request: Request) -> Session | None:
        session_id = request.cookies.get(COOKIE, "")
        if not session_id or len(session_id) > 100:
            return None
        raw = await self.store.get(_session_key(session_id))
        if raw is None:
            return None
        data = json.loads(raw)
        if data["via"] == "token" and (
            not self.token_login or not hmac.compare_digest(data.get("token", ""), self.token_id())
        ):
            # opened with an admin_token that is no longer the one (or token login is off)
            await self.store.delete(_session_key(session_id))
            return None
        return Session(session_id, data["user"], data["csrf"], data["via"], data["created"])

    async def close(self, session: Session) -> None:
        await self.store.delete(_session_key(session.id))

    def is_https(self, request: Request) -> bool:
        if request.url.scheme == "https":
            return True
        forwarded = request.headers.get("x-forwarded-proto", "")
        return self.from_trusted_proxy(request) and forwarded.lower() == "https"

    def set_cookie(self, response: Response, request: Request, session: Session) -> None:
        response.set_cookie(
            COOKIE,
            session.id,
            max_age=int(self.settings.session_ttl),
            path="/console",
            httponly=True,
            samesite="strict",
            secure=self.is_https(request),
        )

    def clear_cookie(self, response: Response, request: Request) -> None:
        response.delete_cookie(
            COOKIE, path="/console", httponly=True, samesite="strict", secure=self.is_https(request)
        )

    def same_origin(self, request: Request) -> bool:
        """The request's Origin (or Referer) is this site: a cross-site form or script is not."""
        claimed = request.headers.get("origin") or request.headers.get("referer") or ""
        if not claimed or claimed == "null":
            return False
        parts = urlsplit(claimed)
        host = request.headers.get("host", "")
        if self.from_trusted_proxy(request):
            host = request.headers.get("x-forwarded-host", host)
        scheme = "https" if self.is_https(request) else "http"
        return parts.scheme == scheme and parts.netloc.lower() == host.lower()

    @staticmethod
    def csrf_matches(session: Session, given: str) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), session.csrf.encode())
