"""The laws and their resampling: laws.py (the protocol every law answers: `Law`, `fit_law`),
law_fit.py (`LawFit`: a fit as data and its predictions), frontier.py (the compute-optimal loss
and its inverse), solve.py (the generic fit), settings.py (`FitSettings`), the built-in laws in
powerlaw.py (power, irreducible: L = A·C^-alpha [+ E]), chinchilla.py (L(N, D)) and law_forms.py
(farseer, data_constrained), law_registry.py (laws by name, with plug-ins), parabola.py (an
optimum in log x), bootstrap.py (resampling and batched refits), replicates.py (seeds as
replicates) and blas.py (one BLAS thread for the small fits)."""
