"""One retry policy for every call to an OpenAI-compatible endpoint (chat and embeddings).

The openai client's own retries are switched off (max_retries=0) so that this policy is the
only one: it decides what is worth retrying, honours the server's Retry-After, and turns the
final failure into an error message a user can act on, without leaking the API key.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import openai

from core.redact import redact_url

log = logging.getLogger(__name__)

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]

# 408 and 429 are the server asking us to come back; 5xx are its own failures.
_RETRYABLE_STATUS = frozenset({408, 429})


# For servers that need no key: the openai client refuses an empty one and would otherwise
# look for OPENAI_API_KEY in the environment.
NO_API_KEY = "no-key"


def openai_client(base_url: str, api_key: str | None, timeout: float) -> openai.AsyncOpenAI:
    """A client whose own retries are off: call_with_retries is the only retry loop."""
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key or NO_API_KEY, timeout=timeout, max_retries=0
    )


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    base_delay: float = 0.5  # seconds before the first retry, doubled each time
    max_delay: float = 20.0
    # A server asking for longer than this is not waited for: the call fails at once (an hour's
    # Retry-After means "not today", and waiting a minute then asking again only adds load).
    max_retry_after: float = 60.0
    jitter: float = 0.5  # each backoff is drawn from [(1 - jitter) * d, d]

    def asks_too_long(self, error: BaseException) -> bool:
        """The server asked to come back later than this policy is willing to wait."""
        asked = retry_after_seconds(error)
        return asked is not None and asked > self.max_retry_after

    def delay(self, retry: int, error: BaseException, rng: Callable[[], float]) -> float:
        """Seconds to wait before retry number `retry` (0-based) after `error`."""
        asked = retry_after_seconds(error)
        if asked is not None:
            return asked
        ceiling = min(self.max_delay, self.base_delay * 2.0**retry)
        # Jitter spreads out clients that failed together, so they do not retry in lockstep.
        return ceiling * (1.0 - self.jitter * rng())


def is_retryable(error: BaseException) -> bool:
    if isinstance(error, openai.APIStatusError):
        return error.status_code in _RETRYABLE_STATUS or error.status_code >= 500
    # Connection refused/reset and timeouts (APITimeoutError is a subclass).
    return isinstance(error, openai.APIConnectionError)


def retry_after_seconds(error: BaseException) -> float | None:
    """The wait a 429/503 response asks for (Retry-After-Ms, or Retry-After in seconds or as
    an HTTP date), or None."""
    if not isinstance(error, openai.APIStatusError):
        return None
    headers = error.response.headers
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    translate: Callable[[Exception, int], Exception],
    sleep: Sleep = asyncio.sleep,
    rng: Callable[[], float] = random.random,
    what: str = "request",
) -> T:
    """Await `call()`, retrying what is worth retrying; raise `translate(error, attempts)`.

    `call` must build a fresh request each time. Errors that are not worth retrying are
    translated at once; errors `translate` is not meant for (bugs) propagate unchanged.
    """
    retry = 0
    while True:
        try:
            return await call()
        except openai.OpenAIError as error:
            if (
                not is_retryable(error)
                or retry >= policy.max_retries
                or policy.asks_too_long(error)
            ):
                raise translate(error, retry + 1) from error
            wait = policy.delay(retry, error, rng)
            log.warning(
                "%s failed (%s); retry %d of %d in %.2fs",
                what,
                short_reason(error),
                retry + 1,
                policy.max_retries,
                wait,
            )
            await sleep(wait)
            retry += 1


def public_endpoint(base_url: str) -> str:
    """The endpoint as it may appear in messages and logs (core.redact: no credentials)."""
    return redact_url(base_url)


def short_reason(error: BaseException) -> str:
    if isinstance(error, openai.APITimeoutError):
        return "timed out"
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}"
    if isinstance(error, openai.APIConnectionError):
        return f"connection failed: {error.__cause__ or error}"
    return type(error).__name__


def describe_failure(
    error: Exception,
    *,
    service: str,
    endpoint: str,
    attempts: int,
    timeout: float,
    secrets: tuple[str, ...] = (),
) -> str:
    """A one-line account of a failed call: what, where, how often, and the server's words."""
    tries = "1 attempt" if attempts == 1 else f"{attempts} attempts"
    if isinstance(error, openai.APITimeoutError):
        text = f"{service} at {endpoint} did not answer within {timeout:g}s ({tries})"
    elif isinstance(error, openai.APIStatusError):
        detail = _server_message(error)
        text = f"{service} at {endpoint} returned HTTP {error.status_code} ({tries})"
        if detail:
            text += f": {detail}"
        asked = retry_after_seconds(error)
        if asked is not None:
            text += f" (the server asked to retry after {asked:g}s)"
    elif isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error
        text = f"cannot reach {service} at {endpoint} ({tries}): {cause}"
    elif isinstance(error, openai.APIError):
        text = f"{service} at {endpoint} failed: {error.message}"
    else:
        text = f"{service} at {endpoint} failed: {type(error).__name__}: {error}"
    for secret in secrets:
        # Some servers echo the key back ("Incorrect API key provided: sk-…").
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
        if message:
            return str(message)[:300]
    if isinstance(body, str):
        return body[:300]
    return ""


__all__ = [
    "NO_API_KEY",
    "RetryPolicy",
    "Sleep",
    "call_with_retries",
    "describe_failure",
    "is_retryable",
    "openai_client",
    "public_endpoint",
    "retry_after_seconds",
]
