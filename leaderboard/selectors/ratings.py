"""Reads of the per-answer ratings (acceptability; relevance, usefulness, factuality): as columns
of the judgments (exports, API, report) and the units behind a rating (drill-down)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import Expression, Q, QuerySet, Value
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import NullIf

from annotation.models import FINE_GRAINED_AXES, Acceptability, HumanJudgment, Study

if TYPE_CHECKING:
    import pandas as pd

RATINGS: tuple[str, ...] = ("acceptability", *FINE_GRAINED_AXES)
# The levels of each kind of rating, in the order the report shows them.
RATING_LEVELS: dict[str, tuple[str, ...]] = {
    "acceptability": tuple(Acceptability.values),
    "axis": ("no", "partial", "yes"),
}
# The per-answer ratings as columns, one per rating and canonical side (A, B): acceptability
# (accept / reject / unsure) and each fine-grained axis (no / partial / yes). NULL where the
# study does not ask for the rating (the stored empty text, a missing axis key).
RATING_COLUMNS: tuple[str, ...] = tuple(
    f"{rating}_{side}" for rating in RATINGS for side in ("a", "b")
)


def _rating_expression(column: str) -> Expression:
    rating, side = column.rsplit("_", 1)
    if rating == "acceptability":
        return NullIf(f"acceptability_{side}", Value(""))
    return KeyTextTransform(rating, KeyTransform(side, "axes"))


def judgments_with_ratings(judgments: QuerySet[HumanJudgment]) -> QuerySet[HumanJudgment]:
    """The judgments annotated with one text column per rating and side, ``rating_<column>``
    for each of :data:`RATING_COLUMNS` (NULL where the study does not ask)."""
    return judgments.annotate(
        **{f"rating_{name}": _rating_expression(name) for name in RATING_COLUMNS}
    )


# The judgments that carry any per-answer rating (the others leave the ratings empty).
RATED = ~Q(acceptability_a="") | ~Q(acceptability_b="") | ~Q(axes={})
RATINGS_FRAME_COLUMNS: list[str] = ["pair_id", "rater", "label", *RATING_COLUMNS]


def ratings_frame(judgments: QuerySet[HumanJudgment]) -> pd.DataFrame:
    """The rated ones among `judgments`, one row each: pair_id, rater ("w" + worker id, as the
    report's other frames name raters), label (the collapsed preference; "" without one) and a
    column per rating and side (:data:`RATING_COLUMNS`; None where not asked), by judgment id."""
    import pandas as pd

    rows = (
        judgments_with_ratings(judgments.filter(RATED))
        .order_by("pk")
        .values_list("pair_id", "worker_id", "preference", *(f"rating_{c}" for c in RATING_COLUMNS))
    )
    frame = pd.DataFrame.from_records(list(rows), columns=RATINGS_FRAME_COLUMNS)
    frame["rater"] = "w" + frame["rater"].astype(str)
    return frame


def rated_pair_ids(
    *, study: Study, system: str, rating: str, level: str
) -> QuerySet[HumanJudgment, int]:
    """A query of the ids of the study's pairs on which some judgment the report reads (not
    excluded) gave the answer of `system` that `level` of `rating` (acceptability, or an axis),
    for use as a subquery; ValueError naming the rating or level when it is not one."""
    if rating not in RATINGS:
        raise ValueError(f"rating must be one of {', '.join(RATINGS)}, not {rating!r}")
    levels = RATING_LEVELS["acceptability" if rating == "acceptability" else "axis"]
    if level not in levels:
        raise ValueError(f"a {rating} level is one of {', '.join(levels)}, not {level!r}")
    judgments = HumanJudgment.objects.filter(study=study, excluded=False)
    found = judgments_with_ratings(judgments).filter(
        Q(pair__answer_a__system__name=system, **{f"rating_{rating}_a": level})
        | Q(pair__answer_b__system__name=system, **{f"rating_{rating}_b": level})
    )
    return found.values_list("pair_id", flat=True).distinct()
