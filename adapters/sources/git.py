"""A git repository as a source, through the `git` command (the reference implementation: every
transport, credential helper and server quirk it handles, this does too).

The repository is cloned once into a cache folder of Tacit's home and fetched at each sync;
files are read from its working tree, checked out (detached) at the commit being synced. The
first sync lists every file of the branch's head; a later one asks git what changed between the
commit last synced and the new head (`git diff --raw -M`: additions, changes, deletions and
renames, which take the old path's documents away). Only regular files are read: a symlink in a
repository could point anywhere on this machine, and a submodule is another repository.
"""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from core.redact import redact_url, redact_urls_in_text
from core.sources.sync import ChangeSet, SourceError

REGULAR_MODES = frozenset({"100644", "100755"})
# Forges whose file pages have a known address: host → the path between the repository and
# the commit ("blob" on GitHub, "-/blob" on GitLab, "src" on Bitbucket, "src/commit" on Gitea).
FORGES = {
    "github.com": "blob",
    "gitlab.com": "-/blob",
    "bitbucket.org": "src",
    "codeberg.org": "src/commit",
}
_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?([\w.-]+):(?!//)(.+)$")  # git@github.com:o/r.git


class GitRepository:
    def __init__(
        self,
        url: str,
        cache: Path,
        *,
        branch: str = "",
        timeout: float = 600.0,
    ) -> None:
        self.url = url if "://" in url or _SCP_LIKE.match(url) else str(Path(url).resolve())
        self.cache = cache
        self.branch = branch
        self.timeout = timeout
        self.changed_at: dict[str, float] = {}  # path -> its last commit's time (changes())

    @property
    def shown_url(self) -> str:
        """The URL without any credential written into it."""
        return redact_url(self.url)

    async def changes(self, since: str | None) -> ChangeSet:
        head = await self.fetch()
        await self._git("checkout", "--quiet", "--force", "--detach", head)
        if since is not None and since != head and not await self.has(since):
            since = None  # history rewritten past it (a force-push): read the whole head
        if since is None:
            changes = ChangeSet(self.cache, head, await self.files(head), full=True)
        elif since == head:
            return ChangeSet(self.cache, head)
        else:
            changed, removed = await self.diff(since, head)
            changes = ChangeSet(self.cache, head, changed, removed)
        self.changed_at = await self.commit_times(head, since, changes.changed)
        return changes

    async def commit_times(
        self, head: str, since: str | None, paths: list[str]
    ) -> dict[str, float]:
        """When each path last changed: the time of the newest commit (up to `head`, after
        `since`) that touched it — what a citation shows as the document's date. A path no
        commit of the range names (a shallow history) gets the head commit's time."""
        wanted = set(paths)
        found: dict[str, float] = {}
        span = head if since is None else f"{since}..{head}"
        out: str = await self._git(
            "log", "-z", "--no-renames", "--format=%x01%ct", "--name-only", span, "--"
        )
        when = 0.0
        for field in out.split("\0"):
            field = field.strip("\n")
            if field.startswith("\x01"):  # a commit: its time, then the paths it touched
                stamp, _, field = field[1:].partition("\n")
                when = float(stamp)
            if field in wanted and field not in found:
                found[field] = when
        if len(found) < len(wanted):
            stamp = (await self._git("log", "-1", "--format=%ct", head)).strip()
            for path in wanted - set(found):
                found[path] = float(stamp)
        return found

    async def fetch(self) -> str:
        """Fetch the branch (the remote's default branch when none is named); its head commit."""
        if not (self.cache / ".git").is_dir():
            self.cache.mkdir(parents=True, exist_ok=True)
            await self._git("init", "--quiet")
        # The URL is set each time: a source whose `where` was edited fetches from the new one.
        if await self._git("remote", check=False) == "":
            await self._git("remote", "add", "origin", self.url)
        else:
            await self._git("remote", "set-url", "origin", self.url)
        ref = f"refs/heads/{self.branch}" if self.branch else "HEAD"
        try:
            await self._git("fetch", "--quiet", "--no-tags", "--prune", "origin", ref)
        except SourceError as exc:
            name = f"branch {self.branch!r}" if self.branch else "the default branch"
            raise SourceError(f"cannot fetch {name} of {self.shown_url}: {exc}") from None
        head: str = await self._git("rev-parse", "--verify", "FETCH_HEAD^{commit}")
        return head.strip()

    async def has(self, commit: str) -> bool:
        return await self._git("cat-file", "-e", f"{commit}^{{commit}}", check=False) is not None

    async def files(self, commit: str) -> list[str]:
        """Every regular file of the commit's tree."""
        out: str = await self._git("ls-tree", "-r", "-z", "--full-tree", commit)
        paths = []
        for entry in filter(None, out.split("\0")):
            meta, path = entry.split("\t", 1)
            if meta.split(" ", 1)[0] in REGULAR_MODES:
                paths.append(path)
        return paths

    async def diff(self, old: str, new: str) -> tuple[list[str], list[str]]:
        """(paths to index again, paths whose documents go) from `old` to `new`."""
        out: str = await self._git("diff", "--raw", "-z", "-M", "--no-abbrev", old, new)
        fields = out.split("\0")
        changed: list[str] = []
        removed: list[str] = []
        i = 0
        while i < len(fields) and fields[i]:
            meta = fields[i].lstrip(":").split(" ")
            new_mode, status = meta[1], meta[4][0]
            if status in "RC":  # renamed or copied: two paths follow
                before, after = fields[i + 1], fields[i + 2]
                i += 3
                if status == "R":
                    removed.append(before)
            else:
                before = after = fields[i + 1]
                i += 2
            if status == "D" or new_mode not in REGULAR_MODES:
                removed.append(after)  # deleted, or now a symlink or submodule
            else:
                changed.append(after)
        return changed, removed

    def web_url(self, path: str, commit: str) -> str | None:
        """The file's page at that commit on a known forge, else None."""
        return forge_url(self.url, path, commit)

    async def _git(self, *args: str, check: bool = True) -> Any:
        """Run git in the cache; its stdout, or None when it failed and `check` is off."""
        env = {
            **os.environ,
            "GIT_TERMINAL_PROMPT": "0",  # never wait for a password nobody will type
            "GIT_ASKPASS": "",
            "LC_ALL": "C",
        }
        try:
            process = await asyncio.create_subprocess_exec(
                "git",
                "-C",
                str(self.cache),
                "-c",
                "core.quotepath=off",
                *args,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
            )
        except FileNotFoundError:
            raise SourceError("git is not installed (it syncs git sources)") from None
        try:
            stdout, stderr = await asyncio.wait_for(process.communicate(), self.timeout)
        except TimeoutError:
            process.kill()
            await process.wait()
            raise SourceError(f"git {args[0]} took longer than {self.timeout:.0f}s") from None
        finally:
            if process.returncode is None:  # cancelled: leave no git running behind
                process.kill()
                await process.wait()
        if process.returncode != 0:
            if not check:
                return None
            message = stderr.decode("utf-8", "replace").strip().splitlines()
            detail = redact_urls_in_text(" ".join(message[-2:])) if message else "no message"
            raise SourceError(f"git {args[0]} failed: {detail}")
        return stdout.decode("utf-8", "surrogateescape")


def forge_url(remote: str, path: str, commit: str) -> str | None:
    """`https://github.com/o/r/blob/<commit>/<path>` for a remote on a known forge."""
    scp = _SCP_LIKE.match(remote) if "://" not in remote else None
    if scp is not None:
        host, repo = scp.group(1), scp.group(2)
    else:
        parts = urlsplit(remote)
        if parts.scheme not in ("https", "http", "ssh", "git"):
            return None
        host, repo = (parts.hostname or ""), parts.path
    page = FORGES.get(host.lower())
    repo = repo.strip("/").removesuffix(".git")
    if page is None or repo.count("/") < 1:
        return None
    return f"https://{host.lower()}/{repo}/{page}/{commit}/{quote(path)}"
