"""The Plackett-Luce reward-model judge: encode, train, score and evaluate.

Modules: `encoder` (sentence embeddings and their cache), `features` (the head on frozen
embeddings), `losses` (listwise PL and AdvisorQA's pairwise recipe), `data` (training examples
from a study), `training`, `scoring`, `evaluation`, `hf` (any local Hugging Face
sequence-classification checkpoint) and `artifacts`. Torch and the encoder are imported only
where they are used, so importing this package (from a view, say) stays cheap.
"""
