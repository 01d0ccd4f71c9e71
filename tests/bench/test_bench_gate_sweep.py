"""bench/bench_gate_sweep.py's own parts: how a constant is moved and found, and the exact sweep
of the request prior's weights (no index, no gate)."""

from __future__ import annotations

import math

import pytest

from tests.bench.loading import bench_module

sweep = bench_module("bench_gate_sweep")


@pytest.mark.parametrize(
    ("value", "factor", "moved"),
    [
        (0.5, 0.9, 0.45),
        (0.5, 1.1, 0.55),
        (2, 0.9, 1),  # a count moves by at least one
        (2, 1.1, 3),
        (16, 0.9, 14),
        (20, 1.1, 22),
        (True, 0.9, None),
    ],
)
def test_a_constant_moves_by_its_factor_and_a_count_by_a_whole_step(value, factor, moved) -> None:
    got = sweep.moved_value(value, factor)
    assert got == pytest.approx(moved) if moved is not None else got is None


def test_every_swept_constant_is_held_by_a_module_of_core() -> None:
    import core.gate.gate  # noqa: F401  (the gate and everything it reads)

    for name in sweep.MODULE_CONSTANTS:
        assert sweep.holders(name), name
    from core.gate.coverage import CoverageOptions

    fields = {f.name for f in CoverageOptions.__dataclass_fields__.values()}
    assert set(sweep.OPTION_FIELDS) <= fields


def _record(covered: tuple[bool, bool], features: list[str], *, marked: bool = False):
    return sweep.Record(False, {True: covered[0], False: covered[1]}, marked, False, features)


def test_a_prior_weight_moves_the_covered_messages_it_tips_over_the_threshold() -> None:
    threshold = 0.5
    weights = {"a": 0.3, "b": -0.05}
    records = [
        _record((True, True), ["a"]),  # logit 0.02: just a request
        _record((True, False), ["a", "b"]),  # logit -0.03: just not one
        _record((True, True), ["a"], marked=True),  # marked: the prior never decides it
        _record((False, False), ["a"]),  # covered at neither point: refused either way
    ]
    intercept = -0.28
    z0 = [intercept + sum(weights[f] for f in r.features) for r in records]
    logit = math.log(threshold / (1 - threshold))
    assert [z >= logit for z in z0] == [True, False, True, True]
    # a ×0.9: the first message's logit falls 0.03 to -0.01, below the cut (both points move);
    # the second's falls further below (no move); the marked and the uncovered do not count
    where = {0, 1, 2, 3}
    moved = sweep._changed(records, z0, logit, lambda i: -0.03 if i in where else 0.0)
    assert moved == 2
    # the threshold raised from 0.5 to 0.55 tips the first message too
    cut = math.log(0.55 / 0.45)
    assert sweep._changed(records, z0, logit, lambda i: 0.0, cut) == 2
    answered = sweep.prior_actions(records, weights, intercept, threshold)
    assert answered == [(True, True), (False, False), (True, True), (False, False)]
