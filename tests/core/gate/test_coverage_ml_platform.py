"""The coverage rule's readings that the ML platform team's chat called for
(tests/data/teams/ml_platform/: error lines pasted on their own or followed by "why?",
"help?", "any idea?"): an asking word alone leans on what precedes it, a pasted error is a
request, "stand for" is the frame, and a question asked "in general" is about the world. Pure:
no embedder; the gate on the team's whole KB is test_coverage_teams.py."""

from __future__ import annotations

from core.gate.coverage import judge
from core.gate.kb_terms import KbTerms
from core.gate.prior import asks
from core.gate.request import analyse
from core.language.terms import content_terms, is_empty_request

# --- the fixes the ML platform KB called for, one by one --------------------------------


def test_an_asking_word_alone_asks_about_the_words_before_it() -> None:
    # "why" (Zipf 5.9), "help" (5.8), "idea" (5.4) are just under the function-word line, so
    # "…, why?" was a request of its own with nothing to look up, however covered its subject
    for request in ("why?", "help?", "any idea?", "any ideas?"):
        assert is_empty_request(request), request
    assert not is_empty_request("is that a bug?")
    assert not is_empty_request("why is the sky blue?")
    kb = KbTerms.build(
        [
            "Idle jobs\nA job at 0% utilisation for 60 minutes is cancelled; reason IdleReaper.",
            "Job stuck in Pending\nCheck forge queue: an FSP below 0.2 means over quota.",
        ]
    )
    for text in (
        "My job was cancelled with reason IdleReaper, why?",
        "my job has been stuck in Pending for an hour, why?",
    ):
        found = judge(text, dense_max=0.2, request_dense=0.05, kb=kb)
        assert found.covered, (text, found.reason)
    # the words before "why?" still have to be the KB's
    found = judge("my cat ignores me all day, why?", dense_max=0.1, request_dense=0.05, kb=kb)
    assert not found.covered, found.reason


def test_a_pasted_error_line_is_a_request() -> None:
    for text in (
        "KilnAdmissionError: pending job limit reached (50)",
        "forge: error: Kiln token expired (exit 4)",
        'I\'m getting "CUDA error: out of memory" on Anvil',
        "PermissionError: [Errno 13] Permission denied: '/quarry/ckpt'",
        "forge ssh is broken on my Mac",
        "部署的时候报错了",
    ):
        assert asks(text), text
    # the word "error" in a sentence is no error as a program prints it
    for text in ("lol that deploy error was wild", "thanks, the error is gone now", "+1"):
        assert not asks(text), text


def test_stand_for_asks_what_mean_asks() -> None:
    assert [t.surface for t in content_terms("what does GHQ stand for")] == ["ghq"]
    assert [t.surface for t in content_terms("GHQ stands for what?")] == ["ghq"]
    assert "stand" in [t.surface for t in content_terms("where is the monitor stand?")]
    assert not analyse("what does GHQ stand for").light
    kb = KbTerms.build(["Acronyms\nGHQ\n   GPU-Hour Quota — the GPU hours a project may spend."])
    found = judge("what does GHQ stand for", dense_max=0.19, request_dense=None, kb=kb)
    assert found.covered, found.reason


# The ML platform KB's out-of-memory runbook, in its own words (kb/troubleshooting.rst).
OOM = [
    "Troubleshooting training jobs > CUDA error: out of memory\nOn Anvil this usually means "
    "**another process is on your GPU**, not that your model is too big. Run ``forge nodes "
    "--drain-zombies``. If the GPUs are clean and you still get OOM, lower the batch size.",
    "Job configuration\nimage: registry.foundry.internal/train/pytorch:2.4-cuda12.4",
    "Kiln tokens\nA Kiln token lasts 12 hours; ``forge login`` makes a new one.",
]


def test_a_question_asked_in_general_is_not_covered_by_similarity_alone() -> None:
    # "in general": the question is about the world, and the team's runbook for its own cluster
    # is near it (0.43) without holding it (56% of its terms in one passage)
    kb = KbTerms.build(OOM)
    text = "How do I fix CUDA out of memory in PyTorch in general?"
    assert analyse(text).general and not analyse("How do I fix CUDA out of memory?").general
    assert "general" not in [t.surface for t in analyse(text).terms]
    found = judge(text, dense_max=0.43, request_dense=None, kb=kb)
    assert not found.covered, found.reason
    # asked of the team, the same similarity answers it
    plain = "How do I fix CUDA out of memory in PyTorch?"
    assert judge(plain, dense_max=0.43, request_dense=None, kb=kb).covered
    # a passage that holds what is asked in general still answers it ("in general" as "as a
    # rule"), in either script
    for asked in ("How long does a Kiln token last in general?", "一般来说 Kiln token 能用多久？"):
        found = judge(asked, dense_max=0.3, request_dense=None, kb=kb)
        assert found.covered, (asked, found.reason)
    assert "一般来说" not in [t.surface for t in content_terms("一般来说 Kiln token 能用多久？")]
