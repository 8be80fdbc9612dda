"""The laws and their resampling: laws.py (the protocol every law answers: `Law`, `fit_law`,
`LawFit`), law_forms.py (the built-in laws), law_registry.py (laws by name, with plug-ins),
powerlaw.py (L = A·C^-alpha [+ E]), chinchilla.py (L(N, D)),
parabola.py (an optimum in log x), bootstrap.py (resampling and batched refits) and
replicates.py (seeds as replicates)."""
