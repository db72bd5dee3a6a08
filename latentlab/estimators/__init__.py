"""scikit-learn style estimators over the inference engines and closed forms."""

from latentlab.estimators.factor_analysis import FactorAnalysis
from latentlab.estimators.ppca import PPCA

__all__ = ["PPCA", "FactorAnalysis"]
