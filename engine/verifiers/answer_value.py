"""Reading the value a stated answer commits to: numbers as people and models write them, number
words, units and percents, and the statements that do not commit (negations, hedges, unworked
expressions). The rules are in docs/verifiers.md ("Committed answers"); answer_span.py decides where
the answer is and calls this module to read it.

- A number is one literal: ``8``, ``-3``, ``8.0``, ``1,000``, ``1 000``, ``1000,99`` (decimal comma),
  ``1e3``, ``3/4`` and ``\\frac{3}{4}`` in lowest terms, a number word ("eight", "thirty-four"), with an
  optional currency sign and a trailing word. ``6*7``, ``12 + 22``, ``\\sqrt{64}``, ``16/2`` are
  unworked expressions, never the number they evaluate to.
- A percent (``%``, ``\\%``, "percent", "pct") divides the value by 100; a measurement unit (``km``,
  "hours"...) is part of the value and must be the reference's unit; with units ignored, both are dropped.
  A currency sign and any other word after the number ("34 marbles", "0.06 yuan") are not units.
- A value is negated when a negation ("not", "n't", "no", "never", "neither"...) comes before it in the
  same clause (a comma, "but", "which is", "it is" close a clause), or "is not the answer", "is wrong"
  follows it; a hedge word ("maybe", "probably", "or"...) in its clause, or a "?" after it, hedges.

Standard library only: math_worker's helper process imports it as a sibling file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from math import gcd

UNIT_MODES = ("strict", "ignore")
LAST_VALUES = 16


@dataclass(frozen=True)
class Quantity:
    """One number as stated: ``number`` as written (before any percent), ``percent``, the measurement
    ``unit`` ("" for none, canonical spelling), and ``literal`` (the digits, for a rounding comparison)."""

    number: Fraction
    percent: bool = False
    unit: str = ""
    literal: str = ""

    def value(self, units: str = "strict") -> Fraction:
        """The value compared: a percent divides by 100 unless units are ignored."""
        return self.number / 100 if self.percent and units == "strict" else self.number

    def shown(self) -> str:
        text = self.literal or str(self.number)
        return text + ("%" if self.percent else "") + (f" {self.unit}" if self.unit else "")


@dataclass(frozen=True)
class Reading:
    """What a stated answer commits to: a Quantity, or the reason it commits to none (``refusal``)."""

    quantity: Quantity | None
    refusal: str = ""
    stated: str = ""


# Text cleaning: LaTeX and typography to plain text ------------------------------------------------

_TEXT_COMMAND = re.compile(
    r"\\(?:text|textnormal|textrm|textsf|textit|textbf|mathrm|mathbf|mathit|mbox|operatorname|rm)\s*\{([^{}]*)\}"
)
_FRACTION = re.compile(r"(-?)\\[dtc]?frac\s*(?:\{\s*(\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))")
_NOISE = re.compile(r"\\[,!;:](?![A-Za-z])|\\left|\\right|\\displaystyle|\\boxed|\\fbox")  # thin spaces join digits
_SPACES = re.compile(r"\\ |\\q?quad")
_DELIMITERS = re.compile(r"\$\$?|\\[()\[\]]")
_REPLACEMENTS = (
    ("\u2212", "-"),
    ("\u2013", "-"),
    ("{,}", ","),
    ("\\%", "%"),
    ("\\$", "$"),
    ("\\times", " * "),
    ("\\cdot", " * "),
    ("\u00d7", " * "),
    ("\u00b7", " * "),
    ("\\div", " / "),
    ("\u00f7", " / "),
    ("\\approx", " \u2248 "),
    ("\\sim", " \u2248 "),
    ("^\\circ", "\u00b0"),
    ("^{\\circ}", "\u00b0"),
)


def clean(text: str) -> str:
    """Plain text for reading: math delimiters and layout commands dropped, ``\\text{x}`` as x, integer
    LaTeX fractions as ``p/q``, multiplication and division signs as ``*`` and ``/``."""
    for old, new in _REPLACEMENTS:
        text = text.replace(old, new)
    text = _TEXT_COMMAND.sub(r" \1", _SPACES.sub(" ", _NOISE.sub("", text)))
    text = _FRACTION.sub(lambda m: f"{m[1]}{m[2] or m[3]}/{m[4] or m[5]}", text)
    text = _DELIMITERS.sub(" ", text)
    return re.sub(r"[ \t\u00a0]+", " ", text).strip()


# Numbers ------------------------------------------------------------------------------------------

_DECIMAL = (
    r"(?:[1-9]\d{0,2}(?:,\d{3}){1,130}(?!\d)(?:\.\d{1,400})?|(?:0|\d{1,400}(?=,(?:\d{1,2}|\d{4,400})(?![\d,])))"
    r",\d{1,400}(?![\d,])|\d{1,400}(?:\.\d{1,400})?|\.\d{1,400})"
)
_LITERAL = rf"{_DECIMAL}(?:[eE][-+]?\d{{1,4}})?(?:/{_DECIMAL})?"
_TOKEN = re.compile(rf"(?<![\w.,/])(?P<sign>(?<![\w)\]}}])-)?[$€£¥]?(?P<literal>{_LITERAL})(?![\w.,/]*\d)")
_SPACED_THOUSANDS = re.compile(r"^[1-9]\d{0,2}(?:[ \u202f]\d{3})+(?:\.\d+)?$")

_ONES = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen".split()
_ONES += ["seventeen", "eighteen", "nineteen"]
_TENS = {
    word: 10 * (index + 2) for index, word in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split())
}
_SCALES = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}
_WORDS = {word: index for index, word in enumerate(_ONES)} | _TENS
_NUMBER_WORD = "|".join(sorted([*_WORDS, *_SCALES], key=len, reverse=True))
_WORD_NUMBER = re.compile(
    rf"(?<![\w-])(?P<sign>(?:minus|negative)\s+)?(?P<words>(?:{_NUMBER_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{_NUMBER_WORD}))*)(?![\w-])",
    re.IGNORECASE,
)


def _decimal(text: str) -> Fraction:
    if re.fullmatch(r"0,\d+|\d+,(?:\d{1,2}|\d{4,})", text):
        text = text.replace(",", ".")  # a decimal comma
    return Fraction(text.replace(",", ""))


def _literal_value(literal: str) -> Fraction | None:
    """The value of a number literal; None for a fraction that is not in lowest terms (an unworked division)."""
    numerator, _, denominator = literal.partition("/")
    value = _decimal(numerator.replace(" ", "").replace("\u202f", ""))
    if not denominator:
        return value
    if not (numerator.isdigit() and denominator.isdigit()):
        return None
    top, bottom = int(numerator), int(denominator)
    if bottom <= 1 or gcd(top, bottom) != 1:
        return None
    return Fraction(top, bottom)


def words_value(words: str) -> int | None:
    """The integer that number words name ("eight", "thirty-four", "one hundred and five"), or None
    when they are not one number ("eight seven")."""
    total, group = 0, 0
    for word in re.split(r"[\s-]+", words.lower()):
        if word in _WORDS:
            value = _WORDS[word]
            if group % 100 and not (group % 100 >= 20 and group % 10 == 0 and value < 10):
                return None
            group += value
        elif word == "hundred":
            group = (group or 1) * 100
        elif word in _SCALES:
            total, group = total + (group or 1) * _SCALES[word], 0
        elif word != "and":
            return None
    return total + group


# Units and percents -------------------------------------------------------------------------------

_UNIT_SPELLINGS = {
    "mm": "mm millimeter millimeters millimetre millimetres",
    "cm": "cm centimeter centimeters centimetre centimetres",
    "m": "m meter meters metre metres",
    "km": "km kilometer kilometers kilometre kilometres",
    "in": "inch inches",
    "ft": "ft foot feet",
    "yd": "yd yard yards",
    "mi": "mi mile miles",
    "mg": "mg milligram milligrams",
    "g": "g gram grams",
    "kg": "kg kilogram kilograms kilo kilos",
    "lb": "lb lbs",
    "oz": "oz ounce ounces",
    "t": "ton tons tonne tonnes",
    "ml": "ml milliliter milliliters millilitre millilitres",
    "l": "l liter liters litre litres",
    "gal": "gal gallon gallons",
    "s": "s sec secs second seconds",
    "min": "min mins minute minutes",
    "h": "h hr hrs hour hours",
    "d": "day days",
    "wk": "week weeks",
    "mo": "month months",
    "yr": "yr yrs year years",
    "km/h": "km/h kph kmh",
    "mph": "mph",
    "m/s": "m/s",
    "deg": "° degree degrees deg",
    "°C": "°c",
    "°F": "°f",
    "rad": "rad radian radians",
}
UNITS = {spelling: unit for unit, spellings in _UNIT_SPELLINGS.items() for spelling in spellings.split()}
_POWERS = {"square": "^2", "sq": "^2", "cubic": "^3", "cu": "^3"}
_PERCENT = re.compile(r"^(?:%|percent(?:age)?|per\s*cent|pct)(?![\w])\s*", re.IGNORECASE)
# Words after a number that make it a range, a sum or a hedge, not a unit: "42 or more", "42 to 50".
_NOT_NOUNS = {"or", "and", "to", "plus", "minus", "times", "over", "by", "more", "less", "than", "either", "maybe"}


def unit_of(words: str) -> str:
    """The canonical measurement unit that words start with ("km", "square meters" -> "m^2", "m²"), or ""."""
    parts = words.strip().lower().replace("²", "^2").replace("³", "^3").split()
    if not parts:
        return ""
    power = _POWERS.get(parts[0], "")
    if power and len(parts) > 1:
        return UNITS[parts[1]] + power if parts[1] in UNITS else ""
    word, _, exponent = parts[0].partition("^")
    return UNITS[word] + (f"^{exponent}" if exponent else "") if word in UNITS else ""


def _suffix(text: str) -> tuple[bool, str] | None:
    """(percent, unit) for what follows a number when the whole answer is one number, or None when it
    is more than a unit or a few words (another number, an operator, "or")."""
    text = text.lstrip()
    percent = _PERCENT.match(text)
    rest = text[percent.end() :] if percent else text
    rest = rest.strip().rstrip(".!")
    if not rest:
        return bool(percent), ""
    words = rest.split()
    if re.search(r"\d|[-+*/^=<>(){}\\|,;]", rest.replace("km/h", "").replace("m/s", "")) and not unit_of(rest):
        return None
    if len(words) > 3 or _NOT_NOUNS & {word.lower() for word in words}:
        return None
    return bool(percent), unit_of(rest)


def read_quantity(text: str) -> Quantity | None:
    """The Quantity a whole text states (``-1,000.5``, ``\\frac{3}{4}``, ``$5``, ``12 km``, ``45%``,
    "eight"), or None: ``41 or 42``, ``6*7``, ``16/2`` and ``1, 2`` are not one number."""
    plain = clean(text).strip().rstrip(".!")
    while plain.startswith("(") and plain.endswith(")") and "," not in plain:  # (7,6) is a pair
        plain = plain[1:-1].strip()
    plain = re.sub(r"^[$€£¥]\s*", "", plain)
    spaced = re.match(r"[-+]?[1-9]\d{0,2}(?:[ \u202f]\d{3})+(?:\.\d+)?(?!\S*\d)", plain)
    if spaced and _SPACED_THOUSANDS.match(spaced.group(0).lstrip("-+")):
        number, rest = spaced.group(0).replace(" ", "").replace("\u202f", ""), plain[spaced.end() :]
    else:
        match = re.match(rf"[-+]?[$€£¥]?\s*(?:{_LITERAL})", plain) or _WORD_NUMBER.match(plain)
        if match is None or match.start() != 0:
            return None
        number, rest = match.group(0), plain[match.end() :]
    value = _number_value(number)
    suffix = _suffix(rest)
    if value is None or suffix is None:
        return None
    return Quantity(value, suffix[0], suffix[1], number.strip())


def _number_value(number: str) -> Fraction | None:
    text = re.sub(r"[$€£¥\s]", "", number) if re.search(r"\d", number) else number.strip()
    sign = -1 if text.startswith(("-", "minus", "negative", "Minus", "Negative")) else 1
    text = re.sub(r"^(?:[-+]|(?:minus|negative)\s*)", "", text, flags=re.IGNORECASE)
    if re.search(r"\d", text):
        value = _literal_value(text)
    else:
        integer = words_value(text)
        value = None if integer is None else Fraction(integer)
    return None if value is None else sign * value


def same_quantity(answer: Quantity, reference: Quantity, units: str = "strict") -> bool:
    """Whether an answer states the reference's value: exactly, in the same unit unless units are ignored."""
    if units == "strict" and answer.unit != reference.unit:
        return False
    return answer.value(units) == reference.value(units)


# Statements ---------------------------------------------------------------------------------------

_NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|none|cannot|nothing)\b|n[’']t\b", re.IGNORECASE)
_CLAUSE_END = re.compile(
    r"[,;:\u2014]|\b(?:but|which|whereas|instead|rather|actually|so|hence|thus|therefore|it\s+is|it[’']s)\b",
    re.IGNORECASE,
)
_POST_NEGATION = re.compile(
    r"[\s})$*\\\]]*(?:[A-Za-z]+\s+){0,2}?(?:is|was|would\s+be)\s*(?:n[’']t|not)\s+(?:the\s+|a\s+|my\s+|our\s+)?"
    r"(?:final\s+)?(?:answer|right|correct|solution|result)\b"
    r"|[\s})$*\\\]]*[:,?]\s*(?:no|nope|wrong|incorrect)\b"
    r"|[\s})$*\\\]]*(?:[A-Za-z]+\s+){0,2}?(?:is|was|would\s+be)\s+(?:wrong|incorrect|false|a\s+mistake)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|likely|might|guess|unsure|either|or|not\s+sure|uncertain)\b|\?",
    re.IGNORECASE,
)
# Operators that join or bound values: "x = 2 \\lor x = 3", "1 \\le x \\le 100", "41 \\cup 42".
_JOINED = re.compile(
    r"\\(?:lor|land|vee|wedge|mid|cup|cap|setminus|implies|iff|Rightarrow|rightarrow|to|pm|mp|le|ge|leq|geq|lt|gt"
    r"|neq|ne|in|notin|subset|subseteq)(?![A-Za-z])|\\\\|(?<=[\w)\s])[<>\u2264\u2265](?=[\s\w(-])|\u00b1|\+-"
)
_OPERATOR_BEFORE = re.compile(
    r"(?:[\w)\]}]\s*(?:[-+*/^]|\bx\b)|\b(?:plus|minus|times|over|divided\s+by|multiplied\s+by|of)"
    r"|\\[A-Za-z]+\s*\{?|[({\[])\s*$",
    re.IGNORECASE,
)
_OPERATOR_AFTER = re.compile(
    r"^(?:\s*(?:[-+*/^]|\bx\b)\s*[\w(\\{.]|!|\s*\^|[(\\]|[A-Za-z]"
    r"|\s+(?:plus|minus|times|divided\s+by|multiplied\s+by)\b|\s*\\(?!text)[A-Za-z])",
    re.IGNORECASE,
)
_BETWEEN_VALUES = re.compile(r"^(?:\s|,|;|/|-|\bor\b|\band\b|\bto\b|\bnor\b)*$", re.IGNORECASE)
_SENTENCE = re.compile(r"(?:[^.!?\n]|\.(?=\d))*(?:[.!?]+|\n|$)")
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_ARITHMETIC = re.compile(r"[\w)}\]]\s*(?:[-+*/^!]|\bx\b)\s*[\w(\\{.]|\\(?:sqrt|frac|binom|log|ln|sin|cos|tan|pi)\b|!")


def negated(text: str, start: int, end: int) -> bool:
    """Whether the value at ``text[start:end]`` is negated: a negation before it in its clause, or
    "is not the answer" / "is wrong" after it."""
    last = max(_NEGATION.finditer(text, 0, start), key=lambda match: match.start(), default=None)
    if last is not None and not _CLAUSE_END.search(text, last.end(), start):
        return True
    return bool(_POST_NEGATION.match(text, end))


def hedged(text: str, start: int, end: int) -> bool:
    """Whether a hedge word (or a "?") shares the clause of the value at ``text[start:end]``."""
    clause_start = 0
    for boundary in _CLAUSE_END.finditer(text, 0, start):
        clause_start = boundary.end()
    after = _CLAUSE_END.search(text, end)
    return bool(_HEDGE.search(text, clause_start, after.start() if after else len(text)))


def is_prose(text: str) -> bool:
    """Whether a stated answer is words around a value rather than math or a bare number."""
    words = [word.lower() for word in _PROSE_WORD.findall(text)]
    return any(word not in UNITS and not _WORD_NUMBER.fullmatch(word) and not _PERCENT.match(word) for word in words)


def _statement_sentence(plain: str) -> tuple[int, str]:
    """The last sentence of a plain text that states a number (digits first, then number words)."""
    sentences = [(match.start(), match.group(0)) for match in _SENTENCE.finditer(plain) if match.group(0).strip()]
    for pattern in (_TOKEN, _WORD_NUMBER):
        for offset, sentence in reversed(sentences):
            if pattern.search(sentence):
                return offset, sentence
    return 0, ""


def _last_side(sentence: str) -> int:
    """Where the value side of a sentence starts: after its last ``=`` (not ``<=``, ``>=``, ``!=``); after
    ``≈`` only when nothing before it is a number (``x ≈ 11``; ``1/3 ≈ 0.33`` is 1/3)."""
    equals = [
        index
        for index, character in enumerate(sentence)
        if character == "=" and sentence[index - 1 : index] not in ("<", ">", "!")
    ]
    start = equals[-1] + 1 if equals else 0
    approx = sentence.find("\u2248", start)
    if approx >= 0 and not _TOKEN.search(sentence, start, approx):
        start = approx + 1
    return start


def read_statement(text: str) -> Reading:
    """What a stated answer (a box's contents, the words after "the answer is", a last line) commits to.
    Out: Reading(quantity) or Reading(None, why): negated, hedged, unworked expression, several values,
    not one number, no number."""
    plain = clean(text)
    offset, sentence = _statement_sentence(plain)
    if not sentence:
        return Reading(None, "no number in the answer")
    joined = _JOINED.search(sentence)
    if joined:
        return Reading(None, f"several values: joined or bounded with {joined.group(0)}; one value is asked")
    side_start = _last_side(sentence)
    side = sentence[side_start:]
    approx = side.find("\u2248")
    if approx >= 0:
        side = side[:approx]
    if not is_prose(side):
        return _read_math(sentence, side_start, side)
    tokens = list(_TOKEN.finditer(side)) or list(_WORD_NUMBER.finditer(side))
    if not tokens:
        return Reading(None, "no number in the answer")
    # The value is the last number the statement does not negate ("8, not 9"; "not 9, it is 8").
    # Only the last few are looked at: each look reads the sentence before it.
    kept = [
        token
        for token in tokens[-LAST_VALUES:]
        if not negated(sentence, side_start + token.start(), side_start + token.end())
    ]
    if not kept:
        return Reading(None, "negated: the answer says what the value is not")
    token = kept[-1]
    start, end = side_start + token.start(), side_start + token.end()
    problem = _statement_problem(sentence, start, end, kept, side)
    if problem:
        return Reading(None, problem)
    value = _number_value(token.group(0))
    suffix = sentence[end:]
    percent = _PERCENT.match(suffix.lstrip())
    unit = (
        "" if percent else unit_of(" ".join(re.split(r"\s+", suffix.strip(" ,.;:!"))[:2]) if suffix[:1] != "" else "")
    )
    if value is None:
        return Reading(None, "unworked expression: a fraction not in lowest terms")
    return Reading(
        Quantity(
            value, bool(percent), unit, token.group("literal") if "literal" in token.groupdict() else token.group(0)
        )
    )


def _statement_problem(sentence: str, start: int, end: int, tokens: list, side: str) -> str:
    if hedged(sentence, start, end):
        return "hedged: the answer is not committed to one value"
    if len(tokens) > 1 and _BETWEEN_VALUES.match(side[tokens[-2].end() : tokens[-1].start()]):
        return "several values: one is asked"
    if (
        _OPERATOR_BEFORE.search(sentence[max(0, start - 40) : start])
        or _OPERATOR_AFTER.match(sentence[end:])
        and not unit_of(sentence[end:].strip().split()[0] if sentence[end:].strip() else "")
    ):
        return "unworked expression: the answer is not evaluated"
    return ""


def _read_math(sentence: str, side_start: int, side: str) -> Reading:
    """A side that is math or a bare value: one number as a whole, or no value."""
    if negated(sentence, side_start, side_start + len(side)) or hedged(sentence, side_start, side_start + len(side)):
        return Reading(None, "negated or hedged: the answer is not committed to one value")
    quantity = read_quantity(side)
    if quantity is not None:
        return Reading(quantity)
    if _ARITHMETIC.search(side) or re.search(r"\d\s*/\s*\d", side):
        return Reading(None, "unworked expression: the answer is not evaluated")
    return Reading(None, "not one number")
