"""What the fitted gate reads of a message: its content, without chat stickers and export
placeholders (core.gate.features.message_content). Pure functions, no stores."""

from __future__ import annotations

import pytest

from core.gate.features import content_to_score, message_content, text_cues


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ("mmdeploy 怎么安装？[捂脸]", "mmdeploy 怎么安装？"),
        ("[旺柴] 大佬太强了", "大佬太强了"),
        ("哈哈[破涕为笑][破涕为笑]好的", "哈哈 好的"),
        ("好的[捂脸]thanks", "好的 thanks"),
        ("好[捂脸]。下一句", "好。下一句"),
        # the export writes a picture as "[图片]", other media as a sentence "emoji" / "sys msg"
        ("[图片]。这是啥。emoji", "这是啥。"),
        (
            "大佬们为啥batchsize设置一样。[图片]。一个这么多。sys msg。一个主干网络 mbv2",
            "大佬们为啥batchsize设置一样。一个这么多。一个主干网络 mbv2",
        ),
        ("sys msg。我就好奇，现在买不买的起房", "我就好奇，现在买不买的起房"),
        ("EMOJI。好的", "好的"),
        ("第一行\nsys msg\n第二行", "第一行 第二行"),
    ],
)
def test_stickers_and_placeholders_are_left_out(text: str, content: str) -> None:
    assert message_content(text) == content
    assert message_content(content) == content  # what is left has nothing more to drop


@pytest.mark.parametrize(
    "text",
    [
        "How do I roll back a bad deploy?",
        "  spaced   out\ttext  ",  # untouched, whitespace and all
        "a。 。b",
        "what does this emoji mean?",  # "emoji" inside a sentence is a word
        "the sys msg queue is full",
        "emoji? yes",
        "",
    ],
)
def test_a_message_without_them_is_unchanged(text: str) -> None:
    assert message_content(text) == text
    assert content_to_score(text) == text


ONLY_STICKERS = [
    "[捂脸]",
    "[捂脸][旺柴]",
    " [捂脸]  [发呆] ",
    "emoji",
    "sys msg。",
    "[图片]。emoji。sys msg",
]


@pytest.mark.parametrize("text", ONLY_STICKERS)
def test_a_message_of_only_stickers_and_placeholders_has_no_content(text: str) -> None:
    assert message_content(text) == ""
    # what the fitted gate embeds of a labelled example like it: the text as written (the
    # gate's filter refuses such a message before any scoring)
    assert content_to_score(text) == text


def test_the_cues_still_see_the_sticker() -> None:
    """The sticker cue reads the message as written; only the content loses the sticker."""
    sticker = text_cues("大佬太强了[旺柴]")[-2]
    plain = text_cues(message_content("大佬太强了[旺柴]"))[-2]
    assert (sticker, plain) == (1.0, 0.0)
