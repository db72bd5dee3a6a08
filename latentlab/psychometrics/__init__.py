"""What a psychometrician reports beside a factor analysis: sampling adequacy (KMO,
Bartlett's test of sphericity), how many factors to retain (parallel analysis,
Velicer's MAP), how well a fitted model reproduces the data (likelihood-ratio test,
RMSEA, CFI, TLI, SRMR) and the report's tables (loadings with communalities,
variance accounted for).  Every function accepts NaN entries: the correlations it
reads are then those of the saturated normal model fitted by full-information
maximum likelihood.  Rotations are :func:`latentlab.rotate`, and the estimators'
``rotation`` setting."""

from latentlab.psychometrics.adequacy import KMO, BartlettSphericity, bartlett_sphericity, kmo
from latentlab.psychometrics.goodness_of_fit import goodness_of_fit
from latentlab.psychometrics.report import loadings_table, summary, variance_table
from latentlab.psychometrics.retention import how_many_factors, parallel_analysis, velicer_map

__all__ = [
    "KMO",
    "BartlettSphericity",
    "kmo",
    "bartlett_sphericity",
    "parallel_analysis",
    "velicer_map",
    "how_many_factors",
    "goodness_of_fit",
    "loadings_table",
    "variance_table",
    "summary",
]
