"""The unfitted gate's first-hour target on each team's KB (tests/data/teams/<team>/).

Each team folder holds kb/ and its pre-registered covered.txt and uncovered.txt, written by
someone who had not read core/gate/ before the gate was first run on them (the sets' headers
say so), and team.toml: what else this test asserts of that team — what its sets claim
(`[sets]`, `[kb_files]`) and messages the gate must answer or refuse as written (`[[answered]]`,
`[[refused]]`), each with why. A new team is a new folder; the coverage rule's thresholds were
set on the demo KB (test_coverage_demo.py), and each team checks they are not the demo's.

Same stack for every team (tests/team_kb.py): USE, Milvus Lite, the SQLite graph, embedded
Redis, the NLP extractor, the shipped request prior, no fit and no LLM. The readings of the
coverage rule that a team's chat called for are tested without an embedder beside this file
(test_coverage_<team>.py)."""

from __future__ import annotations

import tomllib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from core.gate.gate import Gate
from core.language.text import CJK_RUN
from tests.conftest import TEST_DATA
from tests.team_kb import assert_first_hour_target, read_set, team_gate

TEAMS_DIR = TEST_DATA / "teams"
TEAMS = sorted(path.name for path in TEAMS_DIR.iterdir() if path.is_dir())
module_loop = pytest.mark.asyncio(loop_scope="module")


def team_spec(team: str) -> dict[str, Any]:
    """The team's team.toml: what this test asserts of it beyond the target."""
    with (TEAMS_DIR / team / "team.toml").open("rb") as file:
        return tomllib.load(file)


def teams_with(*keys: str) -> list[str]:
    return [team for team in TEAMS if any(key in team_spec(team) for key in keys)]


@pytest.fixture(scope="module")
def team(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gate(team: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    """One team's KB indexed into fresh stores, its gate kept for the module's tests of that
    team (pytest groups them, so one team's stores are open at a time)."""
    root = tmp_path_factory.mktemp(f"{team}-coverage")
    async with team_gate(root, team, TEAMS_DIR / team / "kb") as gate:
        yield gate


@module_loop
@pytest.mark.parametrize("team", TEAMS, indirect=True)
async def test_unfitted_gate_meets_the_first_hour_target(team: str, gate: Gate) -> None:
    # ≤ 1 in 20 covered questions refused; ≥ 9 in 10 uncovered ones refused
    await assert_first_hour_target(gate, team, TEAMS_DIR / team)


@module_loop
@pytest.mark.parametrize("team", teams_with("answered", "refused"), indirect=True)
async def test_the_messages_the_team_spec_names_are_judged_as_written(
    team: str, gate: Gate
) -> None:
    spec = team_spec(team)
    for case in spec.get("answered", []):
        decision = await gate.decide(team, case["text"], addressed=True)
        assert not decision.refused, (case["text"], case["why"], decision.reason)
    for case in spec.get("refused", []):
        decision = await gate.decide(team, case["text"], addressed=True)
        assert decision.refused, (case["text"], case["why"], decision.reason)


@pytest.mark.parametrize("team", teams_with("sets"))
def test_the_sets_are_what_they_claim(team: str) -> None:
    """Big enough for the target to mean something, in both scripts, in the markup formats
    the team writes, and marked as written before the gate ran on them."""
    spec, data = team_spec(team), TEAMS_DIR / team
    sets, files = spec["sets"], spec.get("kb_files", {})
    covered, uncovered = read_set(data, "covered.txt"), read_set(data, "uncovered.txt")
    assert len(covered) >= sets["covered_at_least"]
    assert len(uncovered) >= sets["uncovered_at_least"]
    assert sum(bool(CJK_RUN.search(t)) for t in covered) >= sets["covered_cjk_at_least"]
    assert sum(bool(CJK_RUN.search(t)) for t in uncovered) >= sets["uncovered_cjk_at_least"]
    for name in ("covered.txt", "uncovered.txt"):
        assert (data / name).read_text("utf-8").startswith("# Pre-registered:")
    kb = data / "kb"
    rst, md = len(list(kb.glob("*.rst"))), len(list(kb.glob("*.md")))
    assert rst >= files.get("rst_at_least", 0)
    assert files.get("md_at_least", 0) <= md <= files.get("md_at_most", md)
    if files.get("every_page_cjk"):
        pages = [path.read_text("utf-8") for path in kb.iterdir()]
        assert sum(bool(CJK_RUN.search(page)) for page in pages) == len(pages)
