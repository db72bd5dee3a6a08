"""Model-agnostic inference engines: jit-compiled EM and MAP/SVI on a NumPyro model."""

from latentlab.inference.em import EMResult, run_em

__all__ = ["EMResult", "run_em"]
