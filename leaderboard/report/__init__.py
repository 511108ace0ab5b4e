"""The analysis report: one module per section (typed result, compute through ``stats/``,
tables and plots) and one ordered registry of sections (:mod:`leaderboard.report.registry`).
:mod:`leaderboard.report.document` puts the sections together into a :class:`Report`, writes it
as JSON and CSV and reads it back from a stored payload.

A page reads a stored payload back and renders it without computing, so these modules, like
``stats/``, import numpy at the top and pandas, scipy and the kernels only inside compute
functions (see :mod:`leaderboard.stats`)."""
