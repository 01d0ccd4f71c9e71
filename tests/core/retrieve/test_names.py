"""The names a passage writes (core.retrieve.names): the bridges' candidates."""

from __future__ import annotations

from core.retrieve.names import capitalised_names, passage_names


def test_runs_of_capitalised_words_with_connectors_in_any_cased_script() -> None:
    names = capitalised_names(
        "The team played at the Androscoggin Bank Colisée, near the Prime Minister of "
        "Australia's office; Lourenço Mutarelli drew it."
    )
    assert "Androscoggin Bank Colisée" in names  # not cut at the first non-ASCII letter
    assert "Prime Minister of Australia's" in names
    assert "Lourenço Mutarelli" in names
    assert "The" not in names and "team" not in names


def test_variants_drop_a_leading_number_and_split_at_and() -> None:
    names = capitalised_names(
        "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley "
        "Temple as Corliss Archer."
    )
    assert names[:3] == ["Kiss and Tell", "Kiss", "Tell"]
    assert {"Shirley Temple", "Corliss Archer", "American"} <= set(names)
    assert "17-year-old Shirley Temple" in names  # the run as written is kept too
    # A number inside a name stays: it is how such pages are titled.
    assert "2011–12 VCU Rams" in capitalised_names("The 2011–12 VCU Rams played well.")


def test_two_runs_joined_by_a_comma_are_also_one_name() -> None:
    names = capitalised_names("The mall is located at McLean, Virginia, in Tysons Corner.")
    assert {"McLean", "Virginia", "McLean, Virginia", "Tysons Corner"} <= set(names)
    dates = capitalised_names("Alfred Balk (July 24, 1930 – November 25, 2010) was a writer.")
    assert not any(name[-1].isdigit() for name in dates)  # "July 24, 1930" is no name


def test_sentence_openers_initials_and_abbreviations() -> None:
    names = capitalised_names(
        "In 1990 Harris W. Fawell joined Manchester United F.C. of the 1995–96 season. "
        "However, Walter Cronkite said so."
    )
    assert "Harris W. Fawell" in names  # an initial does not end the sentence
    assert "Manchester United F.C." in names  # nor does an abbreviation; no trailing number
    assert "Walter Cronkite" in names
    assert not {"In", "However", "In 1990"} & set(names)


def test_passage_names_put_quoted_titles_first_and_keep_chinese_titles() -> None:
    names = passage_names('The song "On My Mind" is by Ellie Goulding.', limit=10)
    assert names[0] == "On My Mind" and "Ellie Goulding" in names
    chinese = passage_names("《红楼梦》是曹雪芹写的小说，见「石头记」。", limit=5)
    assert chinese == ["红楼梦", "石头记"]
    assert len(passage_names("Alpha Beta, Gamma Delta, Epsilon Zeta, Eta Theta.", limit=2)) == 2
    assert passage_names("", limit=5) == [] and passage_names("no names here.", limit=5) == []


def test_question_keywords_leave_out_word_fragments() -> None:
    from core.retrieve.keywords import nlp_keywords

    low = nlp_keywords(
        "Where are Gila monsters found, in the country with the political party that Sergio "
        "Tolento Hernández belongs to, which Lourenço Mutarelli left?"
    ).low
    assert {"Sergio Tolento Hernández", "Lourenço Mutarelli"} <= set(low)
    # The extractor's ASCII words cut "Hernández" and "Lourenço": no fragment is a keyword.
    assert not any(k.endswith(("Hern", "Louren")) or k.startswith("ndez") for k in low)
