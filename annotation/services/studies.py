"""Writes to a study's own settings: its status."""

from __future__ import annotations

from django.db.models import QuerySet

from annotation.models import Study

# Which statuses a study may move to from which: a closed study stays closed, because its
# pay and reports are final.
STATUS_FROM: dict[str, tuple[str, ...]] = {
    Study.Status.LIVE: (Study.Status.DRAFT, Study.Status.PAUSED),
    Study.Status.PAUSED: (Study.Status.LIVE,),
    Study.Status.CLOSED: (Study.Status.DRAFT, Study.Status.LIVE, Study.Status.PAUSED),
}


def studies_status_set(*, studies: QuerySet[Study], status: Study.Status) -> int:
    """Move the given studies to `status` where the move is allowed; return how many moved.

    One conditional UPDATE (`WHERE status IN allowed`), so a study changed meanwhile by someone
    else is left alone rather than overwritten.
    """
    allowed = STATUS_FROM.get(status)
    if allowed is None:
        raise ValueError(f"Studies cannot be moved back to {status!r}.")
    return studies.filter(status__in=allowed).update(status=status)
