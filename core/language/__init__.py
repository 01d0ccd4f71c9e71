"""The language layer, at the bottom of core: how Tacit reads text in English and Chinese.

Scripts and sentences (text), word frequency, folding and stems (words), Chinese segmentation
(chinese_words), a message's terms (terms), key phrases and stop words (phrases), quantities and
units (quantities), the values a question asks for (asked_values), lines and table rows that
hold a subject and a predicate (rows), and the fixed sentences Tacit says (wording).

Everything above (index, retrieve, reason, answer, gate) may import it; it imports nothing of
core but the language layer itself (the import-linter layers contract in pyproject.toml).
"""
