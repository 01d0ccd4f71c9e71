"""The one reader of HTTP request bodies, used by every route of `tacit serve` (the /v1 API,
Slack's Events API, Telegram's webhook, the console's forms) before anything parses or verifies
the body.

Starlette's `request.body()` and slack-bolt read a whole body into memory before any size or
signature check, so a 400 MB chunked POST grew the process by 600 MB before it was refused. This
reader refuses a declared Content-Length over the limit at once, and otherwise pulls the body
chunk by chunk, stopping with 413 as soon as the running total passes the limit, so at most
one chunk beyond the limit is ever held.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from python_multipart.multipart import parse_options_header
from starlette.datastructures import FormData
from starlette.formparsers import FormParser, MultiPartException, MultiPartParser
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # nginx's client_max_body_size 1m in deploy/ agrees


class BodyRejected(Exception):
    """The body was not read: too large, a malformed Content-Length, or the client left."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason

    def response(self) -> Response:
        # Close the connection: the server would otherwise read (and discard) the rest of a
        # body it already refused, to keep the connection alive for the next request.
        return JSONResponse(
            {"error": self.reason}, status_code=self.status, headers={"connection": "close"}
        )


async def capped_stream(request: Request, limit: int) -> AsyncGenerator[bytes, None]:
    """The request's body chunk by chunk, at most `limit` bytes; raises BodyRejected (413) as
    soon as the running total passes it (or at once, for a declared Content-Length over it)."""
    declared = request.headers.get("content-length")
    if declared is not None:
        # Only plain digits: int() would also take "+5", " 5", "5_0" and 4,000-digit numbers.
        if not (declared.isascii() and declared.isdigit()) or len(declared) > 19:
            raise BodyRejected(400, "malformed Content-Length")
        if int(declared) > limit:
            raise BodyRejected(413, f"request body too large (limit {limit} bytes)")
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BodyRejected(413, f"request body too large (limit {limit} bytes)")
            yield chunk
    except ClientDisconnect:
        raise BodyRejected(400, "the client went away before sending the whole body") from None


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, at most `limit` bytes; raises BodyRejected (413) past it."""
    return b"".join([chunk async for chunk in capped_stream(request, limit)])


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


async def read_form(request: Request, limit: int, *, max_fields: int = 100) -> FormData:
    """The request's form (urlencoded or multipart), parsed from the capped stream: the whole
    body, files included, is at most `limit` bytes, so no field, file or count of fields can
    hold more than that. Raises BodyRejected: 413 past the limit, 400 for a body that is not
    a form or a malformed one."""
    content_type, _ = parse_options_header(request.headers.get("content-type", ""))
    stream = capped_stream(request, limit)
    try:
        if content_type == b"multipart/form-data":
            parser: FormParser | MultiPartParser = MultiPartParser(
                request.headers,
                stream,
                max_files=max_fields,
                max_fields=max_fields,
                max_part_size=limit,
            )
        elif content_type == b"application/x-www-form-urlencoded":
            parser = FormParser(request.headers, stream, max_fields=max_fields, max_part_size=limit)
        else:
            raise BodyRejected(400, f"expected a form body ({' or '.join(FORM_TYPES)})")
        return await parser.parse()
    except MultiPartException as exc:
        raise BodyRejected(400, f"malformed form: {exc.message}") from None
    finally:
        await stream.aclose()
