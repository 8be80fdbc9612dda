"""The laws and their resampling: powerlaw.py (L = A·C^-alpha [+ E]), chinchilla.py (L(N, D)),
parabola.py (an optimum in log x), bootstrap.py (resampling and batched refits) and
replicates.py (seeds as replicates)."""
