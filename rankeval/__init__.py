"""Pure ranking measures that both the PL reward model (`judges.reward`: its training metrics and
evaluation) and the report (`leaderboard`: AdvisorQA's Table 3, the gold order's NDCG) use:
NDCG@k (`ndcg`) and AdvisorQA's listwise measures (`listwise`). numpy only, no Django, no app:
neither app owns them, so that judges need not import leaderboard. The rules of
`leaderboard/stats/` hold here too: arrays in, frozen dataclasses out, a seed for anything
random, each function's formula and source in its docstring.
"""
