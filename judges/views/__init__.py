"""The judges app's HTML pages, one module per thing they serve.

`runs` starts, watches, cancels and resumes judge runs and shows their calls; `judges` connects,
tests and configures judges and panels; `pl` trains the Plackett-Luce reward model; `references`
has a reference judge write a study's missing reference answers.
"""
