"""Pure statistics for Concord: numpy, scipy, pandas and krippendorff only, no Django.

Arrays and DataFrames go in, frozen dataclasses or DataFrames come out, and anything random takes
a ``seed``. Each public function names its formula and its source in its docstring.
"""
