"""The guards that keep names out of NebulaGraph statements and Milvus collection names
against a trailing newline: `re.match(r"^…$")` matched before a final "\\n", so "space\\n"
passed as an identifier and a vertex id, and "tacit_\\n" as a collection prefix."""

from __future__ import annotations

import pytest

from adapters.graph.nebula_statements import CHUNK, _vid_literal, identifier, vid
from adapters.vector.milvus_store import MilvusVectorStore
from core.errors import ConfigError
from core.kb import validate_kb_name


@pytest.mark.parametrize("tail", ["\n", "\r\n"])
def test_a_trailing_newline_passes_no_guard(tail: str, tmp_path: object) -> None:
    with pytest.raises(ValueError):
        identifier("tacit_ops" + tail)
    with pytest.raises(ValueError):
        _vid_literal(vid(CHUNK, "a") + tail)
    with pytest.raises(ValueError):
        validate_kb_name("ops" + tail)
    with pytest.raises(ConfigError):
        MilvusVectorStore(uri=f"{tmp_path}/milvus.db", collection_prefix="tacit_" + tail)
