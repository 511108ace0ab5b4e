"""Find phrases in which an answer names the model that wrote it or the company that made it.

A blind comparison is no longer blind when an answer says "As an AI language model developed by
OpenAI ..." or "I'm Claude". The scan looks only for self-reference (I am / I was trained by / my
name is / as <model>,), so a mere mention of a product ("Google Sheets", "the Meta description
tag", "the llama is an animal") does not flag. Hits are meant for a researcher to review, not to
reject automatically.

Pure: no Django imports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

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


def scan_answer(text: str, *, system_names: Iterable[str] = ()) -> list[str]:
    """Return the phrases in which the answer names itself or its maker, in order, without repeats.

    `system_names` adds the study's own system names to the list of models looked for.
    """
    if not text:
        return []
    pattern = _compiled(tuple(sorted(set(system_names))))
    found: list[str] = []
    for match in pattern.finditer(text):
        phrase = " ".join(match.group(0).split()).rstrip(",")
        if phrase not in found:
            found.append(phrase)
    return found
