"""Reference answers of prompts: set once, then frozen.

A prompt's reference answer (``Prompt.reference_turns``, one text per turn) is shown to
reference-guided judges; their calls and copied grades refer to it by hash, so it is never
replaced once set. The importer sets imported ones (annotation.services.importing); a reference
judge's writer (judges.services.references) sets the ones it writes through
:func:`prompt_reference_set`.
"""

from __future__ import annotations

from collections.abc import Sequence

from annotation.models import Prompt
from core.errors import ApplicationError

__all__ = ["prompt_reference_set"]

SOURCE_MAX = Prompt._meta.get_field("reference_source").max_length or 120


def prompt_reference_set(*, prompt_id: int, reference_turns: Sequence[str], source: str) -> bool:
    """Give the prompt this reference if it has none; True if it was set.

    Frozen: a prompt that already has a reference (imported, or written earlier) keeps it, and
    the check and the write are one UPDATE, so two writers cannot both set one.
    """
    turns = [str(text) for text in reference_turns]
    if not turns or not all(text.strip() for text in turns):
        raise ApplicationError("a reference answer needs a non-empty text for each turn it gives")
    if not source.strip():
        raise ApplicationError("a reference answer needs a source")
    updated = Prompt.objects.filter(pk=prompt_id, reference_turns__isnull=True).update(
        reference_turns=turns, reference_source=source[:SOURCE_MAX]
    )
    return updated == 1
