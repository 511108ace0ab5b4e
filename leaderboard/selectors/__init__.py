"""Reads for the analysis, one module per job; import from the module, not from the package.

- `frames`: a study's votes as long-format DataFrames (pairs, people's votes, judge calls and
  their combined votes), filtered (`VoteFilters`, `study_votes_get`).
- `packed`: the bulk read behind the frames: a queryset's columns as one aggregated string each,
  decoded by numpy or pandas (`frame_read_coded`, `frame_read`).
- `extras`: the rows the later report sections read besides the votes (answer lengths, cited
  values, gold ranks, answer scores, imported verdicts marked inconsistent).
- `snapshots`: the data hash a report is computed from, the cheap fingerprint that says whether a
  snapshot is current, and the snapshot of a key.
- `exports`: the export tables and their rows, and the export jobs.
- `drilldown`: the units behind a report cell and one unit's detail.
- `filters`: the choices a researcher may filter the analysis by.
- `api`: the analysis API's operations and the studies it lists.
- `followup`: two judge runs' disagreements, which run voted the better side, and their counts
  (the follow-up rationale-only study).
"""
