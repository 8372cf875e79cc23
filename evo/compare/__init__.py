"""`evo compare`: sample every policy on the same held-out instances with matched candidate
budgets (pass@k, best@k, diversity, Pareto fraction, with confidence intervals), then run
evolutionary search with each on hard instances (success rate, best-so-far vs calls)."""
