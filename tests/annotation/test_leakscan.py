"""The identity-leak scan flags an answer that names itself or its maker, and nothing else."""

from __future__ import annotations

import pytest

from annotation.leakscan import scan_answer


@pytest.mark.parametrize(
    ("text", "phrase"),
    [
        (
            "As an AI language model developed by OpenAI, I cannot browse the web.",
            "As an AI language model developed by OpenAI",
        ),
        (
            "As an AI model trained by Google, I have no opinions.",
            "As an AI model trained by Google",
        ),
        (
            "I am ChatGPT, a large language model trained by OpenAI.",
            "I am ChatGPT, a large language model trained by OpenAI",
        ),
        (
            "I'm Claude, an AI assistant made by Anthropic.",
            "I'm Claude, an AI assistant made by Anthropic",
        ),
        ("Hello! I'm Claude. How can I help?", "I'm Claude"),
        ("I am Llama 2, and I am happy to help.", "I am Llama 2"),
        ("I\u2019m Gemini.", "I\u2019m Gemini"),
        ("I was trained by Meta AI on public data.", "I was trained by Meta AI"),
        ("I was created by DeepMind.", "I was created by DeepMind"),
        ("I have been developed by Mistral AI.", "I have been developed by Mistral AI"),
        ("My name is Qwen and I was made by Alibaba Cloud.", "My name is Qwen"),
        ("As GPT-4, I can reason about code.", "As GPT-4"),
        ("I am an AI assistant called Copilot.", "I am an AI assistant called Copilot"),
        ("My developers at Cohere built me for search.", "My developers at Cohere"),
        ("i am gpt-4o.", "i am gpt-4o"),
        ("I am Grok, built by xAI.", "I am Grok"),
    ],
)
def test_an_answer_that_names_its_model_or_maker_is_flagged(text: str, phrase: str) -> None:
    assert phrase in scan_answer(text)


@pytest.mark.parametrize(
    "text",
    [
        "Use Google Sheets: put the totals in column B and chart them.",
        "Add a Meta description tag to every page so search engines show a summary.",
        "The llama is an animal of the Andes, related to the camel.",
        "Go is a language developed by Google. As a language developed by Google, it is fast.",
        "The mistral is a cold wind that blows through the Rhone valley.",
        "I am a Gemini, born in early June.",
        "I'm using Copilot in my editor every day.",
        "Microsoft Excel and Google Docs both export CSV.",
        "The falcon stooped on its prey; an alpaca watched.",
        "Meta-learning trains a model to learn new tasks quickly.",
        "I was trained by my grandfather to fish.",
        "ChatGPT is a chatbot developed by OpenAI in 2022.",
        "",
    ],
)
def test_a_mere_mention_of_a_product_or_a_word_is_not_flagged(text: str) -> None:
    assert scan_answer(text) == []


def test_the_studys_own_system_names_count_as_models() -> None:
    text = "I am atlas-large, happy to help."
    assert scan_answer(text) == []
    assert scan_answer(text, system_names=["atlas-large"]) == ["I am atlas-large"]


def test_very_short_system_names_are_ignored_as_too_common() -> None:
    assert scan_answer("I am ok, thanks.", system_names=["ok"]) == []


def test_each_phrase_is_reported_once_in_the_order_found() -> None:
    text = "I'm Claude. I was trained by Anthropic. Again: I'm Claude."
    assert scan_answer(text) == ["I'm Claude", "I was trained by Anthropic"]
