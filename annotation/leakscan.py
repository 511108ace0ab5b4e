"""Find phrases in which an answer names the model that wrote it or the company that made it.

A blind comparison is no longer blind when an answer says "As an AI language model developed by
OpenAI ..." or "I'm Claude". The scan looks only for self-reference (I am / I was trained by / my
name is / as <model>,), so a mere mention of a product ("Google Sheets", "the Meta description
tag", "the llama is an animal") does not flag. Hits are meant for a researcher to review, not to
reject automatically.

The scan reads the answer as the worker will see it (`worker_visible_text`): rendered with the
worker page's own markdown renderer, tags stripped, entities decoded, NFKC-normalised, format and
zero-width characters removed, dashes and apostrophes unified, and non-Latin look-alike letters
(Cyrillic, Greek) folded onto the Latin ones, so `I'm **Claude**`, `Open**AI**`, `Open&#65;I`,
`Cl\u200baude`, full-width or Cyrillic spellings all read as the plain name.

Pure: no Django imports.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

from annotation.rendering import markdown_render_safe

# Names that are also ordinary words ("a bard", "meta-learning", "the mistral wind") match only
# with their usual capitalisation; the others match in any case.
MAKERS: tuple[str, ...] = (
    "OpenAI",
    "Anthropic",
    "Google",
    "Google DeepMind",
    "DeepMind",
    "Alphabet",
    "(?-i:Meta)",
    "Meta AI",
    "Facebook",
    "(?-i:Mistral)",
    "Mistral AI",
    "Cohere",
    "Alibaba",
    "Alibaba Cloud",
    "DeepSeek",
    "LMSYS",
    "Microsoft",
    "xAI",
    "Hugging Face",
    "HuggingFace",
    "Stability AI",
    "Technology Innovation Institute",
    "Baidu",
    "Zhipu AI",
    "01.AI",
    "AI21 Labs",
    "Amazon",
    "Nvidia",
    "Inflection AI",
    "Perplexity",
)
MODELS: tuple[str, ...] = (
    "ChatGPT",
    "GPT",
    "GPT-3",
    "GPT-3.5",
    "GPT-3.5-turbo",
    "GPT-4",
    "GPT-4 Turbo",
    "GPT-4o",
    "GPT-4o mini",
    "InstructGPT",
    "Claude",
    "Claude 2",
    "Claude 3",
    "(?-i:Gemini)",
    "(?-i:Bard)",
    "PaLM",
    "PaLM 2",
    "LaMDA",
    "Gemma",
    "(?-i:Llama|LLaMA|LLAMA)",
    "(?-i:Llama|LLaMA|LLAMA)[ -]?[23](?:\\.\\d)?",
    "(?-i:Mistral)",
    "Mixtral",
    "Command R",
    "Command R\\+",
    "Qwen",
    "DeepSeek",
    "Vicuna",
    "(?-i:Alpaca)",
    "(?-i:Falcon)",
    "(?-i:Copilot)",
    "Bing Chat",
    "(?-i:Phi)(?:-[1-4])?",
    "(?-i:Grok)",
    "(?-i:Koala)",
    "(?-i:Dolly)",
    "ERNIE Bot",
    "Tongyi Qianwen",
    "(?-i:Pi)",
    "(?-i:Jurassic)",
    "StableLM",
    "WizardLM",
    "(?-i:Zephyr)",
    "OpenAssistant",
    "Open Assistant",
)
# Study system names shorter than this are too likely to be ordinary words.
MIN_SYSTEM_NAME_LENGTH = 3

_VERB = r"(?:developed|trained|created|made|built|designed|programmed|produced|fine-tuned|owned)"
_NOUN = r"(?:model|assistant|chatbot|system)"
# "an AI", "an AI language model", "a large language model", "an assistant"; not "a language"
# alone, because "As a language developed by Google, Go ..." is about Go.
_AI_NOUN = (
    rf"(?:an?\s+)?(?:large\s+)?(?:AI(?:\s+(?:language\s+)?{_NOUN})?"
    rf"|(?:artificial\s+intelligence|language|conversational)\s+(?:language\s+)?{_NOUN}"
    r"|assistant|chatbot)"
)
_END = r"(?![\w-])"
# After "I am <model>" we want the end of a clause or a description, not "I am Claude's fan".
_AFTER_SELF_NAME = (
    r"(?=\s*(?:[,.;:!?)\u2014]|$|\s(?:an?|the|and|from|by|made|developed|created|trained|built"
    r"|version|model|here)\b))"
)


def _alternation(names: Iterable[str]) -> str:
    # Longest first, so that "GPT-4o" wins over "GPT-4" and "Google DeepMind" over "Google".
    return "(?:" + "|".join(sorted(set(names), key=_shown_length, reverse=True)) + ")"


def _shown_length(name: str) -> int:
    """The length of the text a name pattern matches, roughly: without its case-scope wrapper."""
    return len(name.replace("(?-i:", "").replace(")", "").replace("\\", ""))


@lru_cache(maxsize=64)
def _compiled(system_names: tuple[str, ...]) -> re.Pattern[str]:
    extra = [
        re.escape(name) for name in system_names if len(name.strip()) >= MIN_SYSTEM_NAME_LENGTH
    ]
    model = _alternation([*MODELS, *extra]) + _END
    maker = _alternation([*MAKERS, *MODELS, *extra]) + _END
    i_am = r"(?:I\s+am|I['\u2019]m)"
    patterns = [
        # "As an AI language model developed by OpenAI", "I am an AI assistant made by Google".
        rf"\b(?:as|{i_am})\s+{_AI_NOUN},?\s+(?:that\s+was\s+|which\s+was\s+)?{_VERB}\s+by\s+{maker}",
        # "I'm an AI assistant called Claude", "I am a language model named ChatGPT".
        rf"\b{i_am}\s+{_AI_NOUN},?\s+(?:called|named|known\s+as)\s+{model}",
        # "I am ChatGPT, a large language model", "I'm Claude."
        rf"\b{i_am}\s+(?:called\s+)?{model}"
        rf"(?:,?\s+{_AI_NOUN},?\s+{_VERB}\s+by\s+{maker})?{_AFTER_SELF_NAME}",
        # "I was trained by OpenAI", "I have been developed by Anthropic".
        rf"\b(?:I\s+was|I['\u2019]ve\s+been|I\s+have\s+been)\s+(?:\w+\s+)?{_VERB}\s+by\s+{maker}",
        # "My name is Claude".
        rf"\bmy\s+name\s+is\s+{model}",
        # "As ChatGPT, I cannot ..."
        rf"\bas\s+{model}\s*,",
        # "(developed|trained) by <maker>" is only a leak with a self-reference: "my creators at
        # OpenAI", "my training by Google".
        rf"\bmy\s+(?:creators?|developers?|makers?|trainers?)\s+(?:at|from)\s+{maker}",
    ]
    return re.compile("|".join(f"(?:{pattern})" for pattern in patterns), re.IGNORECASE)


# Letters of other scripts that look like Latin ones, folded onto them. A hand-picked subset of
# Unicode's confusables (UTS #39): the full skeleton also maps Latin onto Latin ("rn" to "m"),
# which would make ordinary words read as names.
_LOOK_ALIKES: dict[str, str] = {
    # Cyrillic
    "\u0430": "a", "\u0410": "A", "\u0412": "B", "\u0432": "b", "\u0441": "c", "\u0421": "C",
    "\u0501": "d", "\u0435": "e", "\u0415": "E", "\u0451": "e", "\u04bb": "h", "\u041d": "H",
    "\u0456": "i", "\u0406": "I", "\u0458": "j", "\u0408": "J", "\u041a": "K", "\u043a": "k",
    "\u04cf": "l", "\u041c": "M", "\u043c": "m", "\u043e": "o", "\u041e": "O", "\u0440": "p",
    "\u0420": "P", "\u051b": "q", "\u0455": "s", "\u0405": "S", "\u0422": "T", "\u0442": "t",
    "\u0443": "y", "\u0423": "Y", "\u0445": "x", "\u0425": "X", "\u051d": "w", "\u0474": "V",
    "\u0475": "v", "\u0417": "3", "\u0433": "r",
    # Greek
    "\u03b1": "a", "\u0391": "A", "\u0392": "B", "\u0395": "E", "\u0396": "Z", "\u0397": "H",
    "\u0399": "I", "\u03b9": "i", "\u039a": "K", "\u03ba": "k", "\u039c": "M", "\u039d": "N",
    "\u03bd": "v", "\u039f": "O", "\u03bf": "o", "\u03a1": "P", "\u03c1": "p", "\u03a4": "T",
    "\u03c4": "t", "\u03a5": "Y", "\u03c5": "u", "\u03a7": "X", "\u03c7": "x", "\u03f2": "c",
    # Latin look-alikes outside ASCII that NFKC keeps
    "\u0131": "i", "\u0261": "g", "\u026a": "I", "\u1d0f": "o", "\u0251": "a",
    # Dashes and apostrophes, so "GPT\u20114" and "I\u02bcm" read as "GPT-4" and "I'm"
    "\u2010": "-", "\u2011": "-", "\u2012": "-", "\u2013": "-", "\u2014": "-", "\u2212": "-",
    "\ufe63": "-", "\u02bc": "'", "\u2018": "'", "\u2019": "'", "\u2032": "'", "\u00b4": "'",
}  # fmt: skip
_LOOK_ALIKE_TABLE = str.maketrans(_LOOK_ALIKES)
# Tags that end a line of text on the page; every other tag is inline (text runs on through it).
_BLOCK_TAG = re.compile(
    r"</?(?:p|br|hr|h[1-6]|pre|blockquote|ul|ol|li|table|thead|tbody|tr|th|td)\b[^>]*>",
    re.IGNORECASE,
)
_ANY_TAG = re.compile(r"<[^>]*>")


def text_fold(text: str) -> str:
    """Normalise text the way a reader's eye does: NFKC, no format characters, look-alikes
    folded onto Latin letters, accents dropped."""
    text = unicodedata.normalize("NFKC", text)
    # Cf: zero-width spaces and joiners, soft hyphens, bidirectional overrides, word joiners.
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    text = text.translate(_LOOK_ALIKE_TABLE)
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize(
        "NFC", "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
    )


def worker_visible_text(markdown: str) -> str:
    """Return the text a worker reads for a markdown answer, folded with `text_fold`.

    Renders with the worker page's renderer (`markdown_render_safe`), so what is hidden there
    (link targets, dropped images, escaped raw HTML shown as text) is treated the same way.
    """
    rendered = markdown_render_safe(markdown)
    text = _ANY_TAG.sub("", _BLOCK_TAG.sub("\n", rendered))
    return text_fold(html.unescape(text))


def scan_answer(text: str, *, system_names: Iterable[str] = ()) -> list[str]:
    """Return the phrases in which the answer names itself or its maker, in order, without repeats.

    Scans the raw text and the text as the worker sees it (`worker_visible_text`); a phrase found
    in both is reported once, as written. `system_names` adds the study's own system names to
    the list of models looked for.
    """
    if not text:
        return []
    names = tuple(sorted({text_fold(name) for name in system_names} | set(system_names)))
    pattern = _compiled(names)
    found: list[str] = []
    seen: set[str] = set()
    for source in (text, worker_visible_text(text)):
        for match in pattern.finditer(source):
            phrase = " ".join(match.group(0).split()).rstrip(",")
            key = text_fold(phrase).casefold()
            if key not in seen:
                seen.add(key)
                found.append(phrase)
    return found
