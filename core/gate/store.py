"""The gate's fit lives with its knowledge base in the StateStore, as versioned JSON.

Two keys per KB, hash-tagged on the KB so a Redis Cluster keeps them in one slot: the fit
itself (about three megabytes with a thousand examples: their embeddings and n-grams) and a
small stamp that running bots check before each decision, reloading the fit only when the
stamp has changed. A third, short-lived key marks a fit of an older format that a bot is
fitting again from the examples it remembers (bot.gate_labels.migrate_stale_fit).
"""

from __future__ import annotations

import json

from core.errors import StoreError
from core.gate.model import FIT_VERSION, GateFit
from core.ports import StateStore


def fit_command(kb: str) -> str:
    """The command that fits the gate of `kb` (every hint about a missing or unusable fit)."""
    return f"tacit gate fit --kb {kb} --good FILE --bad FILE"


def fit_key(kb: str) -> str:
    return f"gate:{{{kb}}}:fit"


def stamp_key(kb: str) -> str:
    return f"gate:{{{kb}}}:stamp"


def refitting_key(kb: str) -> str:
    return f"gate:{{{kb}}}:refitting"


class StaleFit(StoreError):
    """A stored fit written by another version of the format: readable JSON, but its features
    are not this Tacit's. `target_precision` is the one it was fitted for, to fit again alike."""

    def __init__(
        self, message: str, *, hint: str, version: int, target_precision: float | None
    ) -> None:
        super().__init__(message, hint=hint)
        self.version = version
        self.target_precision = target_precision


async def claim_refit(state: StateStore, kb: str, *, ttl: float) -> bool:
    """Mark the KB's stale fit as being fitted again; False when another bot already is (the
    mark expires after `ttl` seconds, so a bot that died mid-fit does not block the next)."""
    return await state.set_if_absent(refitting_key(kb), str(FIT_VERSION), ttl=ttl)


async def release_refit(state: StateStore, kb: str) -> None:
    await state.delete(refitting_key(kb))


async def save_fit(state: StateStore, kb: str, fit: GateFit) -> None:
    await state.set(fit_key(kb), json.dumps(fit.to_json(), separators=(",", ":")))
    # The stamp goes last: a reader that sees the new stamp finds the new fit.
    await state.set(stamp_key(kb), f"{FIT_VERSION}:{fit.fitted_at!r}")


async def fit_stamp(state: StateStore, kb: str) -> str | None:
    return await state.get(stamp_key(kb))


async def load_fit(state: StateStore, kb: str) -> GateFit | None:
    """The stored fit, or None if the KB has none. A fit written by another version of the
    format is reported (StaleFit), not guessed at; its hint says whether a bot is fitting it
    again from remembered examples or a person has to."""
    raw = await state.get(fit_key(kb))
    if raw is None:
        return None
    try:
        data = json.loads(raw)
        version = int(data.get("version", 0))
        if version != FIT_VERSION:
            refitting = await state.get(refitting_key(kb)) is not None
            precision = data.get("target_precision")
            raise StaleFit(
                f"the gate fit of knowledge base {kb!r} has format version {version}, this "
                f"Tacit reads version {FIT_VERSION}",
                hint=(
                    f"it is being fitted again to version {FIT_VERSION} from the examples it "
                    "was fitted on: the unfitted rule decides until then"
                    if refitting
                    else f"fit it again: {fit_command(kb)}"
                ),
                version=version,
                target_precision=float(precision) if precision is not None else None,
            )
        return GateFit.from_json(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreError(
            f"the stored gate fit of knowledge base {kb!r} is unreadable ({exc})",
            hint=f"fit it again: {fit_command(kb)}",
        ) from exc


async def delete_fit(state: StateStore, kb: str) -> None:
    await state.delete(fit_key(kb), stamp_key(kb))
