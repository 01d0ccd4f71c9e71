"""The unfitted gate's target on a fifth KB, a hospital lab-informatics team's (docs/BENCHMARKS.md,
"Gate coverage on a fresh team's KB" and the KBs after it).

tests/data/fifth_team/ is the internal docs of a hospital laboratory information system team
("LabIT" at a bilingual hospital: lis-core, analyzer-gw, autoverify, crit-notify, his-bridge,
specimen-track, qc-monitor), in Markdown and reStructuredText, some pages English, some Chinese,
most mixed: an architecture page, an on-call rota, runbooks with error-code tables (GW-307,
CN-503, SPC-009), config keys (SNAKE_CASE, dotted.keys, --cli-flags), critical-value limits with
units, a release process, a glossary and a FAQ. It and covered.txt / uncovered.txt were written by
someone who had not read core/gate/, the other teams' sets or the gate tests before the gate was
first run on it (see each set file's header). The questions are team chat in Chinese, English and
both, some with "@bot", greetings or typos. Same stack as the other team tests: USE, Milvus Lite,
SQLite graph, embedded Redis, the NLP extractor, the shipped request prior, no LLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from core.gate.gate import Gate
from core.text import CJK_RUN
from tests.team_kb import assert_first_hour_target, read_set, team_gate

KB = "fifth"
DATA = Path(__file__).parent / "data" / "fifth_team"
module_loop = pytest.mark.asyncio(loop_scope="module")


def read(name: str) -> list[str]:
    return read_set(DATA, name)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def gate(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gate]:
    async with team_gate(tmp_path_factory.mktemp("fifth-coverage"), KB, DATA / "kb") as gate:
        yield gate


@pytest.mark.xfail(
    strict=True,
    reason=(
        "first run on the pre-registered sets: 11 of 59 covered questions refused (target ≤ 2), "
        "2 of 30 uncovered ones answered (target ≤ 3); the misses are '@bot' and Chinese asking "
        "words ('啥意思', '要求', '排查') taken as terms the passage lacks, a trailing clause "
        "with no terms taken as the whole request, '能不能' not read as a question, and "
        "Chinese questions on English pages"
    ),
)
@module_loop
async def test_unfitted_gate_meets_the_target_on_a_lab_informatics_kb(gate: Gate) -> None:
    # ≤ 1 in 20 covered questions refused; ≥ 9 in 10 uncovered ones refused (docs/BENCHMARKS.md)
    await assert_first_hour_target(gate, KB, DATA)


def test_the_fifth_sets_are_what_they_claim() -> None:
    """Big enough for the targets to mean something, in both scripts, in both markup formats,
    and marked as written before the gate ran on them."""
    covered, uncovered = read("covered.txt"), read("uncovered.txt")
    assert len(covered) >= 45 and len(uncovered) >= 25
    assert sum(bool(CJK_RUN.search(t)) for t in covered) >= 20
    assert sum(bool(CJK_RUN.search(t)) for t in uncovered) >= 10
    for name in ("covered.txt", "uncovered.txt"):
        assert (DATA / name).read_text("utf-8").startswith("# Pre-registered:")
    kb = DATA / "kb"
    assert len(list(kb.glob("*.rst"))) >= 1 and len(list(kb.glob("*.md"))) >= 8
    pages = [path.read_text("utf-8") for path in kb.iterdir()]
    assert sum(bool(CJK_RUN.search(page)) for page in pages) == len(pages)
