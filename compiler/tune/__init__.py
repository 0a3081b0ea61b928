"""Schedule search support that needs no simulator: the tuning space of an operator, the
workload identity of a point, and the cost model's features (codesign.tune measures and
searches)."""
