"""Pure statistics for Concord: numpy, scipy, pandas and krippendorff only, no Django.

Arrays and DataFrames go in, frozen dataclasses or DataFrames come out, and anything random takes
a ``seed``. Each public function names its formula and its source in its docstring.

Only numpy is imported at the top of a module. scipy, pandas and the compiled Elo kernel (numba)
are imported inside the functions that compute, and pandas under ``TYPE_CHECKING`` for the
annotations: the result dataclasses are read back from snapshots by web processes that compute
nothing, and those must not carry some 200 MB of libraries they never call
(tests/leaderboard/test_lean_pages.py).
"""
