"""Pair priorities for active selection: stored here, computed by the analysis worker.

The analysis app computes each regular pair's priority (leaderboard/services/priority.py) and
hands it to pair_priorities_store, since a pair's row is this app's to write. The claim
(annotation/sql/annotation_claim_pass.sql) walks the pairs by `priority_key`, highest first.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from annotation.models import Pair, Study

# A priority is at least this much when it is used as a weight in a key (1e-6 keeps every
# positive priority's key above -7.5e8), and a zero priority's key lies between -1e12 - 745e3 and
# -1e12: below every positive one and above Pair.PRIORITY_KEY_NONE's -1e15, random among zeros.
_WEIGHT_FLOOR = 1e-6
_ZERO_BASE = -1e12


def priority_key_draw(priority: float, rng: random.Random) -> float:
    """Return an Efraimidis-Spirakis key for one pair: ``ln(u) / w`` with u uniform on (0, 1].

    Source: P. S. Efraimidis & P. G. Spirakis (2006), "Weighted random sampling with a
    reservoir", Information Processing Letters 97(5):181-185: with keys ``u^(1/w)`` drawn once per
    item, the items sorted by key, highest first, are a weighted random sample without
    replacement (the first is item i with probability ``w_i / sum_j w_j``, each next one likewise
    among those left). ``ln(u) / w`` is the logarithm of ``u^(1/w)``, so it sorts the same and
    does not underflow for small w. A zero priority gets a key below every positive one.
    """
    u = 1.0 - rng.random()  # in (0, 1]: ln(u) is finite
    if priority <= 0:
        return _ZERO_BASE + 1e3 * math.log(u)
    return math.log(u) / max(priority, _WEIGHT_FLOOR)


@dataclass(frozen=True)
class PrioritiesStored:
    pairs: int
    pool: int
    total: float


# The open regular pairs of a study (taken slots fewer than the overlap), as the claim counts
# them, and the sum of their priorities.
_POOL = """
SELECT count(*), coalesce(sum(p.priority), 0)
FROM annotation_pair p
WHERE p.study_id = %(study)s AND NOT p.is_gold
  AND (SELECT count(*) FROM annotation_assignment a
       WHERE a.pair_id = p.id
         AND (a.status = 'submitted' OR (a.status = 'reserved' AND a.expires_at > %(now)s)))
      < %(overlap)s
"""

_UPDATE = """
UPDATE annotation_pair p SET priority = v.priority, priority_key = v.priority_key
FROM unnest(%(ids)s::bigint[], %(priorities)s::float8[], %(keys)s::float8[])
     AS v(id, priority, priority_key)
WHERE p.id = v.id AND p.study_id = %(study)s AND NOT p.is_gold
"""


def pair_priorities_store(
    *, study: Study, priorities: Mapping[int, float], seed: int | None = None
) -> PrioritiesStored:
    """Store the regular pairs' priorities with freshly drawn keys, and the study's pool.

    `priorities` maps pair ids of the study to values in [0, 1]; regular pairs it leaves out get
    priority 0. Gold pairs and other studies' pairs are never written. One transaction: the keys,
    the pool size k and the priority total W change together, so the claim reads a matching
    e / k + (1 - e) p / W. Raises ValueError for a priority outside [0, 1].
    """
    for pair_id, value in priorities.items():
        if not (0.0 <= value <= 1.0) or math.isnan(value):
            raise ValueError(f"priority of pair {pair_id} must lie in [0, 1], not {value}")
    rng = random.Random(seed)
    ids = list(
        Pair.objects.filter(study=study, is_gold=False).order_by("pk").values_list("pk", flat=True)
    )
    values = [float(priorities.get(pk, 0.0)) for pk in ids]
    keys = [priority_key_draw(value, rng) for value in values]
    now = timezone.now()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_UPDATE, {"ids": ids, "priorities": values, "keys": keys, "study": study.pk})
        cursor.execute(_POOL, {"study": study.pk, "now": now, "overlap": study.overlap})
        pool, total = cursor.fetchone()
        Study.objects.filter(pk=study.pk).update(
            priority_pool=pool, priority_total=float(total), priorities_at=now
        )
    return PrioritiesStored(pairs=len(ids), pool=int(pool), total=float(total))
