"""The in-process BM25 index of the embedded vector store (adapters/vector/bm25_index.py).

The contract suite (tests/contracts/test_vector_store.py, backend `lite`) checks what every
lexical search promises; these check what only the in-process index does: one analyzer with
Milvus (on diacritic-folded text), persistence without a rebuild, rebuilding a stale or
missing index, or one cut by another analyser, from the texts in Milvus, tombstones for
deletions, and the Lite collection made without Milvus's BM25 field.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import adapters.vector.bm25_index as bm25_index
from adapters.vector import MilvusVectorStore
from adapters.vector.analysis import DEFAULT_ANALYZER, analyse
from adapters.vector.bm25_index import BM25Indexes, analyse_texts
from core.errors import ConfigError
from core.language.text import fold_diacritics
from core.models import VectorRecord

DIM = 8
DOCS = {
    "fox": ("The quick brown fox jumps over the lazy dog.", "a"),
    "milvus": ("Milvus Lite stores vectors in a local directory.", "a"),
    "graph": ("A knowledge graph links entities by relations.", "b"),
    "zh": ("知识图谱由实体和关系组成，Milvus 是向量数据库。", "b"),
}


def records() -> list[VectorRecord]:
    rng = np.random.default_rng(3)
    return [
        VectorRecord(key, rng.standard_normal(DIM).astype(np.float32), text, source)
        for key, (text, source) in DOCS.items()
    ]


async def open_store(path: Path, **options: object) -> MilvusVectorStore:
    store = MilvusVectorStore(str(path / "milvus.db"), **options)  # type: ignore[arg-type]
    await store.ensure(DIM)
    return store


def test_the_analyzer_is_the_one_milvus_lite_runs() -> None:
    from milvus_lite.analyzer.factory import create_analyzer

    lite = create_analyzer(DEFAULT_ANALYZER)
    for text in [*(t for t, _ in DOCS.values()), 'Who was the Director of "Kiss and Tell"?']:
        assert analyse(text) == lite.tokenize(text)
    # With Latin diacritics: Milvus's cut of the folded text (the in-process index folds).
    for text in ["Aschenbrödel is a Czech fairy tale.", "Lourenço Mutarelli, 北京 Café"]:
        assert analyse(text) == lite.tokenize(fold_diacritics(text))
    assert analyse("知识图谱") == ["知识", "图谱"]
    assert analyse("The FOX, and the dog.") == ["fox", "dog"]


async def test_lite_defaults_to_the_in_process_index_without_a_sparse_field(
    tmp_path: Path,
) -> None:
    store = await open_store(tmp_path)
    try:
        assert store.lexical_in_memory
        assert not MilvusVectorStore("http://127.0.0.1:19530").lexical_in_memory
        client = await store._connect()
        fields = {f["name"] for f in client.describe_collection("tacit_chunks")["fields"]}
        assert "sparse" not in fields
        await store.upsert("chunks", "kb", records())
        [[hit]] = await store.lexical_search("chunks", "kb", ["lazy dog"])
        assert (hit.id, hit.source) == ("fox", "a")
    finally:
        await store.aclose()
    with pytest.raises(ConfigError, match="lexical"):
        MilvusVectorStore(str(tmp_path / "m.db"), lexical="elastic")


async def test_a_reopened_store_loads_the_saved_index_without_reading_milvus(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_store(tmp_path)
    await store.upsert("chunks", "kb", records())
    await store.delete("chunks", "kb", ids=["milvus"])
    await store.aclose()

    reopened = MilvusVectorStore(str(tmp_path / "milvus.db"))

    async def no_reading(kb: str) -> list[tuple[str, str, str]]:
        raise AssertionError("the saved index should have been loaded")

    monkeypatch.setattr(reopened._bm25, "_read_chunks", no_reading)

    def no_building(*_: object) -> None:
        raise AssertionError("the model was saved when the store closed")

    monkeypatch.setattr(bm25_index, "build_model", no_building)
    try:
        fox, gone, zh = await reopened.lexical_search(
            "chunks", "kb", ["fox", "Milvus directory", "知识图谱"]
        )
        assert [h.id for h in fox] == ["fox"]
        assert [h.id for h in gone] == ["zh"]  # "milvus" was deleted before closing
        assert [h.id for h in zh] == ["zh"]
        assert reopened._client is None  # the saved index answered: Milvus was never opened
    finally:
        await reopened.aclose()


async def test_a_kb_without_a_saved_index_is_searched_through_the_store(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    await store.upsert("chunks", "kb", records())
    await store.aclose()
    reopened = MilvusVectorStore(str(tmp_path / "milvus.db"))
    try:
        assert await reopened.lexical_search("chunks", "other", ["fox"]) == [[]]
        assert reopened._client is not None  # nothing saved for that KB: the store was asked
    finally:
        await reopened.aclose()


async def test_a_stale_index_is_rebuilt_from_the_texts_in_milvus(tmp_path: Path) -> None:
    """A process that died between writing Milvus and saving the index left it STALE."""
    store = await open_store(tmp_path)
    await store.upsert("chunks", "kb", records())
    await store.aclose()
    second = MilvusVectorStore(str(tmp_path / "milvus.db"))
    extra = VectorRecord("new", np.ones(DIM, np.float32), "A zebra grazes.", "c")
    await second.upsert("chunks", "kb", [extra])
    assert second._bm25 is not None
    second._bm25.save = _no_save  # type: ignore[method-assign]  # dies before saving
    await second.aclose()

    reopened = MilvusVectorStore(str(tmp_path / "milvus.db"))
    try:
        [[hit]] = await reopened.lexical_search("chunks", "kb", ["zebra"])
        assert (hit.id, hit.text, hit.source) == ("new", "A zebra grazes.", "c")
    finally:
        await reopened.aclose()


async def _no_save() -> None:
    return None


def test_folding_takes_latin_diacritics_off_and_leaves_other_scripts_alone() -> None:
    assert fold_diacritics("Aschenbrödel, Łódź, Straße, Ærø, café") == (
        "Aschenbrodel, Lodz, Strasse, AEro, cafe"
    )
    assert fold_diacritics("cafe\u0301") == "cafe"  # a combining accent after a Latin letter
    # Japanese voicing marks, Hangul, Cyrillic and Greek letters are not Latin accents.
    for text in ["知识图谱", "がぎ", "한국어", "й ё", "Ἀθῆναι", "и\u0306"]:
        assert fold_diacritics(text) == text


def test_diacritics_are_folded_at_index_and_query_time() -> None:
    # jieba alone cuts "Aschenbrödel" into "aschenbr", "ö", "del": no spelling finds it.
    assert analyse("Aschenbrödel") == ["aschenbrodel"] == analyse("Aschenbrodel")
    assert analyse("Tekezé River") == analyse("Tekeze River") == ["tekeze", "river"]
    assert analyse("知识图谱") == ["知识", "图谱"]


async def test_either_spelling_of_an_accented_name_finds_the_other(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    try:
        text = "Drei Haselnüsse für Aschenbrödel is a 1973 fairy tale film."
        await store.upsert(
            "chunks", "kb", [VectorRecord("tale", np.ones(DIM, np.float32), text, "t")]
        )
        plain, accented = await store.lexical_search(
            "chunks", "kb", ["Aschenbrodel", "Haselnusse"], limit=3
        )
        assert [h.id for h in plain] == [h.id for h in accented] == ["tale"]
    finally:
        await store.aclose()


async def test_an_index_cut_by_an_older_analyser_is_rebuilt_from_the_texts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data home indexed before the analyser folded diacritics: its saved terms are the
    unfolded cut, which no folded query matches, so it is re-cut once when opened."""
    from milvus_lite.analyzer.factory import create_analyzer

    unfolded = create_analyzer(DEFAULT_ANALYZER).tokenize
    with monkeypatch.context() as old:
        old.setattr(bm25_index, "analyse", unfolded)
        old.setattr(bm25_index, "ANALYSER_VERSION", 1)
        store = await open_store(tmp_path)
        text = "Aschenbrödel is a Czech fairy tale."
        await store.upsert(
            "chunks", "kb", [VectorRecord("tale", np.ones(DIM, np.float32), text, "t")]
        )
        await store.aclose()

    reopened = MilvusVectorStore(str(tmp_path / "milvus.db"))
    try:
        [hits] = await reopened.lexical_search("chunks", "kb", ["Aschenbrodel"], limit=3)
        assert [h.id for h in hits] == ["tale"]
    finally:
        await reopened.aclose()


async def test_a_home_made_with_milvus_bm25_gets_an_index_from_its_texts(
    tmp_path: Path,
) -> None:
    """Data homes made before the in-process index: Lite collections with Milvus's BM25."""
    old = await open_store(tmp_path, lexical="milvus")
    await old.upsert("chunks", "kb", records())
    await old.aclose()
    assert not (tmp_path / "milvus.db.bm25").exists()
    store = MilvusVectorStore(str(tmp_path / "milvus.db"))
    try:
        [[hit]] = await store.lexical_search("chunks", "kb", ["knowledge graph"], limit=1)
        assert hit.id == "graph"
        await store.upsert("chunks", "kb", [VectorRecord("z", np.ones(DIM), "zebra", "z")])
        [[zebra]] = await store.lexical_search("chunks", "kb", ["zebra"])
        assert zebra.id == "z"
    finally:
        await store.aclose()


async def test_deletions_are_tombstones_until_enough_to_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    builds: list[int] = []
    real_build = bm25_index.build_model

    def counting(vocab: dict[str, int], docs: dict[str, object]) -> object:
        builds.append(len(docs))
        return real_build(vocab, docs)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25_index, "build_model", counting)

    async def nothing(kb: str) -> list[tuple[str, str, str]]:
        return []

    indexes = BM25Indexes(tmp_path / "bm25", nothing)
    many = [VectorRecord(f"d{i}", (), f"shared word{i}", "s") for i in range(12)]
    await indexes.prepare_change("kb")
    await indexes.put("kb", many, await analyse_texts([r.text for r in many]))
    [hits] = await indexes.search("kb", ["shared"], limit=20)
    assert len(hits) == 12 and builds == [12]
    await indexes.remove("kb", ["d0", "d1"], None)  # 2 of 12: tombstones, no rebuild
    [hits] = await indexes.search("kb", ["shared"], limit=20)
    assert {h.id for h in hits} == {f"d{i}" for i in range(2, 12)} and builds == [12]
    [[top]] = await indexes.search("kb", ["word0 word5"], limit=1)
    assert top.id == "d5"  # the best hit is a tombstone: the next one is returned
    await indexes.remove("kb", None, "s")  # every one of them: rebuilt (empty)
    assert await indexes.search("kb", ["shared"], limit=5) == [[]]
    # A replaced text: the old terms stop matching at once.
    await indexes.put("kb", [VectorRecord("x", (), "alpha", "s")], [["alpha"]])
    await indexes.put("kb", [VectorRecord("x", (), "beta", "s")], [["beta"]])
    alpha, beta = await indexes.search("kb", ["alpha", "beta"], limit=5)
    assert alpha == [] and [(h.id, h.text) for h in beta] == [("x", "beta")]


async def test_chunks_without_a_searchable_term_have_no_hits(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    try:
        await store.upsert("chunks", "kb", [VectorRecord("a", np.ones(DIM), "the, of", "s")])
        assert await store.lexical_search("chunks", "kb", ["the", "zebra"]) == [[], []]
    finally:
        await store.aclose()  # saves (and builds) an index with no term


async def test_drop_removes_the_index_files(tmp_path: Path) -> None:
    store = await open_store(tmp_path)
    try:
        await store.upsert("chunks", "kb", records())
        await store.lexical_search("chunks", "kb", ["fox"])  # builds and saves
        assert any((tmp_path / "milvus.db.bm25").rglob("CURRENT"))
        await store.drop()
        assert not (tmp_path / "milvus.db.bm25" / "tacit_").exists()
        await store.ensure(DIM)
        assert await store.lexical_search("chunks", "kb", ["fox"]) == [[]]
    finally:
        await store.aclose()


def test_bm25s_debug_lines_stay_out_of_the_terminal() -> None:
    """bm25s sets its logger to DEBUG on import; Tacit quiets it when it first uses it."""
    import logging

    from adapters.vector.bm25_index import _bm25s

    logging.getLogger("bm25s").setLevel(logging.DEBUG)  # as `import bm25s` leaves it
    _bm25s()
    assert not logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)
