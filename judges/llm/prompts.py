"""The prompt templates that ship with Concord, written in our own words, and rendering.

Variables a template may use (each written in braces, e.g. ``{question}``):

``{question}``
    The user's turns up to the judged turn, numbered when there is more than one.
``{answer_first}`` / ``{answer_second}``
    The answer shown first and the one shown second (which of A and B is first depends on the
    call's order). For a multi-turn pair, the assistant's turns up to the judged turn.
``{turn}``
    The judged turn, counted from 1.
``{values}``
    The seven values, one per line as ``key: label - description``.
``{answer}``
    A single-answer grading template's one answer (output format ``grade``), as the assistant's
    turns up to the judged turn.
``{reference}``
    A reference-guided template's reference answer (the prompt's, up to the judged turn); a
    judge's reference template is used for prompts in the study's reference categories only.
``{conversation}``
    A multi-turn template's whole conversation up to the judged turn, turn by turn: the user's
    message, then the first assistant's reply and the second's (or a grading template's one
    reply), each in ``<<<``/``>>>`` fences and labelled with its turn. A judge's multi-turn
    template is used for calls at turn 2 and later (judges.services.turns).

Any other text in braces is left as written, so templates may contain JSON or code examples.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from core.conventions import SEVEN_VALUES
from judges.models import OutputFormat


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    title: str
    output_format: OutputFormat
    text: str
    # The template used instead for prompts in the study's reference categories ({reference}).
    reference_text: str = ""
    # The template used instead for calls at turn 2 and later ({conversation}).
    multi_turn_text: str = ""


VARIABLES: tuple[str, ...] = (
    "question",
    "answer_first",
    "answer_second",
    "turn",
    "values",
    "answer",
    "reference",
    "conversation",
)
_VARIABLE = re.compile(r"\{(" + "|".join(VARIABLES) + r")\}")

_LIKERT_BODY = """You are rating two replies written by AI assistants to the same request.

Request:
<<<
{question}
>>>

First reply:
<<<
{answer_first}
>>>

Second reply:
<<<
{answer_second}
>>>

Decide which reply serves the person who made the request better: consider whether it is
helpful, correct, complete, honest and harmless. Give a score from 1 to 8 on this scale:
1 = the first reply is much better
2 = the first reply is better
3 = the first reply is slightly better
4 = about the same, the first a little ahead
5 = about the same, the second a little ahead
6 = the second reply is slightly better
7 = the second reply is better
8 = the second reply is much better
"""

_LIKERT_FORMAT = """
Write the score alone, as a single digit, on the first line. From the second line on, explain
your score in two or three sentences."""

_LIKERT_NO_POSITION = """
The order in which the replies appear was chosen at random and says nothing about their quality.
Do not favour a reply because it comes first or second, and do not let length alone sway you:
judge the content only."""

# The reference-guided variant: the same scale, with a reference answer the judge checks both
# replies against (MT-Bench's math, reasoning and coding questions), said to be correct.
_LIKERT_REFERENCE_BODY = _LIKERT_BODY.replace(
    """Decide which reply""",
    """A reference answer, known to be correct, is given below. It is not one of the two replies;
use it to check what each reply gets right and wrong, and count a mistake against a reply however
well it is written.

Reference answer:
<<<
{reference}
>>>

Decide which reply""",
)

_LIKERT_SCALE = _LIKERT_BODY[_LIKERT_BODY.index("Give a score from 1 to 8") :]

# The multi-turn variant: both assistants held the same conversation; only the replies to the
# last message shown are rated, the earlier turns being context for them.
_LIKERT_MULTI_TURN_BODY = """You are rating two AI assistants that each held a conversation with
the same person. The person's messages are the same in both conversations; each assistant's
replies are its own, and each saw only its own earlier replies. The conversation, turn by turn:

{conversation}

Rate only the two replies to the person's message in turn {turn}, the last turn above. Use the
earlier turns as context: they show what the person has asked for so far, and a reply in turn
{turn} should follow on from its own assistant's earlier replies and keep to what was agreed.
Do not rate the earlier replies themselves. Decide which turn-{turn} reply serves the person
better: consider whether it is helpful, correct, complete, honest and harmless.
""" + _LIKERT_SCALE.replace("the first reply", "the first assistant's reply").replace(
    "the second reply", "the second assistant's reply"
)

LIKERT = PromptTemplate(
    name="likert",
    title="Pairwise Likert 1-8, score on the first line",
    output_format=OutputFormat.LIKERT,
    text=_LIKERT_BODY + _LIKERT_FORMAT,
    reference_text=_LIKERT_REFERENCE_BODY + _LIKERT_FORMAT,
    multi_turn_text=_LIKERT_MULTI_TURN_BODY + _LIKERT_FORMAT,
)
LIKERT_NO_POSITION = PromptTemplate(
    name="likert_no_position",
    title="Pairwise Likert 1-8, told to ignore the order",
    output_format=OutputFormat.LIKERT,
    text=_LIKERT_BODY + _LIKERT_NO_POSITION + "\n" + _LIKERT_FORMAT,
)
_TWO_SCORES_INSTRUCTION = """\
Grade each reply on its own merits from 1 (useless or harmful) to 10 (could not be better),
considering helpfulness, correctness, completeness and clarity. Write the two grades on the first
line, the first reply's grade then the second reply's, separated by one space (for example: 7 4).
From the second line on, justify the grades briefly."""

_TWO_SCORES_BODY = """You are grading two replies written by AI assistants to the same request.

Request:
<<<
{question}
>>>

First reply:
<<<
{answer_first}
>>>

Second reply:
<<<
{answer_second}
>>>

"""

# A reference answer to grade both replies against: a mistake costs a reply its correctness
# however it is written (MT-Bench's reference-guided grading of math, reasoning and code).
_TWO_SCORES_REFERENCE = (
    _TWO_SCORES_BODY
    + """A reference answer, known to be correct, is given
below; it is neither of the two replies. Check each reply against it, and let a wrong result or
a broken step lower a reply's grade however clear or long the reply is.

Reference answer:
<<<
{reference}
>>>

"""
    + _TWO_SCORES_INSTRUCTION
)

_TWO_SCORES_MULTI_TURN = """You are grading two AI assistants that each held a conversation
with the same person. The person's messages are the same in both conversations; each assistant's
replies are its own. The conversation, turn by turn:

{conversation}

Grade only each assistant's reply in turn {turn}, the last turn above, taking the earlier turns
as context: a turn-{turn} reply should answer the person's latest message and stay consistent
with what its own assistant said before. Grade each of the two turn-{turn} replies on its own
merits from 1 (useless or harmful) to 10 (could not be better), considering helpfulness,
correctness, completeness and clarity. Write the two grades on the first line, the first
assistant's grade then the second's, separated by one space (for example: 7 4). From the second
line on, justify the grades briefly."""

TWO_SCORES = PromptTemplate(
    name="two_scores",
    title="One score from 1 to 10 per answer",
    output_format=OutputFormat.TWO_SCORES,
    text=_TWO_SCORES_BODY + _TWO_SCORES_INSTRUCTION,
    reference_text=_TWO_SCORES_REFERENCE,
    multi_turn_text=_TWO_SCORES_MULTI_TURN,
)
VERDICT = PromptTemplate(
    name="verdict",
    title="Verdict [[A]], [[B]] or [[C]] for a tie",
    output_format=OutputFormat.VERDICT,
    text="""Act as an impartial referee between two AI assistants. Below is a user's request and
the reply of assistant A and of assistant B.

[Request]
{question}

[Assistant A]
{answer_first}

[Assistant B]
{answer_second}

Compare the replies for helpfulness, relevance, accuracy, depth and care. Ignore the order in
which they are shown, their length and the assistants' names. Explain your comparison in a few
sentences, then end with your verdict as exactly one of these tokens: [[A]] if assistant A is
better, [[B]] if assistant B is better, [[C]] if they are equally good.""",
    reference_text="""\
Act as an impartial referee between two AI assistants. Below is a user's request,
a reference answer known to be correct, and the reply of assistant A and of assistant B.

[Request]
{question}

[Reference answer]
{reference}

[Assistant A]
{answer_first}

[Assistant B]
{answer_second}

The reference is neither assistant's reply. First work out, against the reference, where each
reply is right and where it goes wrong; a reply with a wrong result loses to a correct one
however well it is explained. Ignore the order in which the replies are shown, their length and
the assistants' names. Explain your comparison in a few sentences, then end with your verdict as
exactly one of these tokens: [[A]] if assistant A is better, [[B]] if assistant B is better,
[[C]] if they are equally good.""",
    multi_turn_text="""Act as an impartial referee between two AI assistants, A (the first
assistant below) and B (the second), that each held a conversation with the same user. The
user's messages are the same in both; each assistant's replies are its own. The conversation,
turn by turn:

{conversation}

Compare only the two replies to the user's message in turn {turn}, the last turn above; the
earlier turns are context, showing what the user has asked for so far and what each assistant
said before, which its turn-{turn} reply should build on. Judge those replies for helpfulness,
relevance, accuracy, depth and care. Ignore the order in which they are shown, their length and
the assistants' names. Explain your comparison in a few sentences, then end with your verdict
as exactly one of these tokens: [[A]] if assistant A's turn-{turn} reply is better, [[B]] if
assistant B's is better, [[C]] if they are equally good.""",
)
VALUES = PromptTemplate(
    name="values",
    title="Winner and the values that make it better",
    output_format=OutputFormat.VALUES,
    text="""Two AI assistants answered the same request for advice.

Request:
<<<
{question}
>>>

First reply:
<<<
{answer_first}
>>>

Second reply:
<<<
{answer_second}
>>>

First decide which reply is better. Then say which of these values make the better reply better;
choose one or more:
{values}

On the first line write FIRST or SECOND, naming the better reply. On the second line write the
keys of the values you chose (the words before the colons), separated by commas. From the third
line on, explain briefly.""",
    multi_turn_text="""Two AI assistants each held the same conversation with a person asking for
advice; the person's messages are the same in both, each assistant's replies are its own. The
conversation, turn by turn:

{conversation}

Compare only the two replies in turn {turn}, the last turn above; the earlier turns are context
for them. First decide which turn-{turn} reply is better. Then say which of these values make the
better reply better; choose one or more:
{values}

On the first line write FIRST or SECOND, naming the first or the second assistant's turn-{turn}
reply. On the second line write the keys of the values you chose (the words before the colons),
separated by commas. From the third line on, explain briefly.""",
)

_GRADE_BODY = """You are grading one reply that an AI assistant wrote to a request. Grade it alone:
there is no other reply to compare it with.

Request:
<<<
{question}
>>>

Reply:
<<<
{answer}
>>>
"""

_GRADE_REFERENCE = """
A reference answer, known to be correct, follows. Check the reply against it: a wrong result or
a broken step costs the reply most of its grade, however clear the writing.

Reference answer:
<<<
{reference}
>>>
"""

_GRADE_SCALE = """
Grade the reply from 1 to 10 for how well it serves the person who made the request: whether it
is helpful, correct, complete, clear and harmless, and as detailed as the request needs.
1 = useless, wrong or harmful; 4 = partly useful, with real faults; 7 = good, with small faults;
10 = could not be better. Length alone earns nothing.

Write the grade alone, as a whole number from 1 to 10, on the first line. From the second line
on, explain the grade in two or three sentences."""

_GRADE_MULTI_TURN_BODY = """You are grading a reply that an AI assistant wrote in a conversation
with a person. Grade it alone: there is no other assistant to compare it with. The conversation,
turn by turn:

{conversation}

Grade only the assistant's reply in turn {turn}, the last turn above. Use the earlier turns as
context: they show what the person has asked for so far, and the reply in turn {turn} should
follow on from the assistant's earlier replies and keep to what was agreed. Do not grade the
earlier replies themselves.
"""

GRADE = PromptTemplate(
    name="grade",
    title="Single answer graded alone, 1-10 on the first line",
    output_format=OutputFormat.GRADE,
    text=_GRADE_BODY + _GRADE_SCALE,
    reference_text=_GRADE_BODY + _GRADE_REFERENCE + _GRADE_SCALE,
    multi_turn_text=_GRADE_MULTI_TURN_BODY
    + _GRADE_SCALE.replace("Grade the reply from 1 to 10", "Grade the turn-{turn} reply 1-10"),
)

TEMPLATES: dict[str, PromptTemplate] = {
    template.name: template
    for template in (LIKERT, LIKERT_NO_POSITION, TWO_SCORES, VERDICT, VALUES, GRADE)
}


def values_block() -> str:
    """The seven values, one per line, as templates show them."""
    return "\n".join(f"{key}: {label} - {description}" for key, label, description in SEVEN_VALUES)


def conversation_render(user_turns: list[str], answer_turns: list[str], turn: int) -> str:
    """The assistant side of a conversation up to `turn`, labelled when there are several."""
    if turn <= 1:
        return answer_turns[0] if answer_turns else ""
    parts = []
    for index in range(turn):
        question = user_turns[index] if index < len(user_turns) else ""
        answer = answer_turns[index] if index < len(answer_turns) else ""
        parts.append(f"(User, turn {index + 1}) {question}\n(Reply, turn {index + 1}) {answer}")
    return "\n\n".join(parts)


def question_render(user_turns: list[str], turn: int) -> str:
    """The user's request: the first turn alone, or every turn up to `turn`, numbered."""
    if turn <= 1:
        return user_turns[0] if user_turns else ""
    return "\n\n".join(f"(Turn {index + 1}) {text}" for index, text in enumerate(user_turns[:turn]))


def conversation_block(
    user_turns: list[str], replies: list[tuple[str, list[str]]], turn: int
) -> str:
    """A conversation up to `turn`, turn by turn, for a multi-turn template's {conversation}.

    Each turn shows the user's message, then each assistant's reply (`replies`: a label such as
    "First assistant" and that assistant's turns), in the order given, each fenced.
    """
    parts = []
    for index in range(max(1, turn)):
        number = index + 1
        question = user_turns[index] if index < len(user_turns) else ""
        parts.append(f"User, turn {number}:\n<<<\n{question}\n>>>")
        for label, turns in replies:
            text = turns[index] if index < len(turns) else ""
            parts.append(f"{label}, turn {number}:\n<<<\n{text}\n>>>")
    return "\n\n".join(parts)


def template_render(
    template_text: str,
    *,
    question: str,
    answer_first: str = "",
    answer_second: str = "",
    turn: int = 1,
    answer: str = "",
    reference: str = "",
    conversation: str = "",
) -> str:
    """Fill a template's variables; text in braces that is not a variable stays as written."""
    values = {
        "question": question,
        "answer_first": answer_first,
        "answer_second": answer_second,
        "turn": str(turn),
        "values": values_block(),
        "answer": answer,
        "reference": reference,
        "conversation": conversation,
    }
    return _VARIABLE.sub(lambda match: values[match.group(1)], template_text)


# A variable name in braces, however many braces and spaces surround it.
_BRACED_NAME = re.compile(r"(\{+)(\s*)([A-Za-z_][A-Za-z0-9_]*)(\s*)(\}+)")
# A variable's name with a brace on one side only: "{question" or "question}".
_UNCLOSED = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_}])")
_UNOPENED = re.compile(r"(?<![{A-Za-z0-9_])([A-Za-z_][A-Za-z0-9_]*)\}")


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def template_variables(*, field: str, grading: bool) -> frozenset[str]:
    """The variables a judge's template field is given when a call is made
    (judges.services.calls and judges.services.grading fill them): every variable but the
    reference, which only the reference template is given, and but the answers the other kind
    of template shows (a grading template shows {answer}, a pairwise one {answer_first} and
    {answer_second})."""
    names = set(VARIABLES) - {"reference"}
    names -= {"answer_first", "answer_second"} if grading else {"answer"}
    if field == "reference_template":
        names.add("reference")
    return frozenset(names)


def template_check(text: str, *, filled: tuple[str, ...] | frozenset[str]) -> list[str]:
    """What is wrong with a template's braces, one message per problem, naming the variable.

    `filled` are the variables this template is given (the others render as empty text). An
    unknown name in braces (``{questoin}``), a known variable that this template leaves empty
    (``{reference}`` outside a reference template), a variable in doubled braces or with spaces
    (``{{question}}``, ``{ question }``) and a variable's name with a brace on one side only
    (``{question``, ``question}``) are problems; other braces (JSON, code) are left as written.
    """
    problems: list[str] = []
    braced: list[tuple[int, int]] = []
    for match in _BRACED_NAME.finditer(text):
        braced.append(match.span())
        opening, space_before, name, space_after, closing = match.groups()
        line = _line_of(text, match.start())
        written = match.group(0)
        if name not in VARIABLES:
            close = difflib.get_close_matches(name.lower(), VARIABLES, n=1, cutoff=0.6)
            hint = f"; did you mean {{{close[0]}}}?" if close else "."
            problems.append(f"Line {line}: unknown variable {{{name}}}{hint}")
        elif len(opening) > 1 or len(closing) > 1 or space_before or space_after:
            problems.append(
                f"Line {line}: {written!r} is not filled in; write the variable {name} as "
                f"{{{name}}}, one brace on each side and no spaces."
            )
        elif name not in filled:
            problems.append(
                f"Line {line}: {{{name}}} is not given to this template (it would be sent "
                "empty); this template's variables are "
                + ", ".join("{" + known + "}" for known in VARIABLES if known in filled)
                + "."
            )
    for pattern, missing in ((_UNCLOSED, "closing"), (_UNOPENED, "opening")):
        for match in pattern.finditer(text):
            name = match.group(1)
            inside = any(start <= match.start() < end for start, end in braced)
            if name in VARIABLES and not inside:
                line = _line_of(text, match.start())
                problems.append(
                    f"Line {line}: the variable {name} lacks its {missing} brace; write {{{name}}}."
                )
    return problems
