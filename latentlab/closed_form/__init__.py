"""Closed-form latent-variable methods as pure ``jax.jit`` functions (JAX only).

``pca``: PCA by full SVD, covariance eigh, randomized SVD or block Lanczos (the
Lanczos solver is shared with kernel PCA), plus the probabilistic-PCA score.
``kernels`` and ``kernel_pca``: kernel PCA with out-of-sample projection and
pre-images.  ``cca``: regularized linear and kernel CCA.  ``whitening``: PCA, ZCA and
Cholesky whitening.  The scikit-learn style classes live in ``latentlab.estimators``.
"""

from latentlab.closed_form.cca import (
    CCAFit,
    KernelCCAFit,
    cca_transform,
    fit_cca,
    fit_kernel_cca,
    kernel_cca_transform,
)
from latentlab.closed_form.kernel_pca import (
    KernelPCAFit,
    fit_kernel_pca,
    fit_preimage,
    kernel_pca_transform,
    preimage,
)
from latentlab.closed_form.kernels import (
    KERNELS,
    KernelParams,
    center_kernel,
    center_test_kernel,
    kernel_matrix,
)
from latentlab.closed_form.pca import (
    PCADecomposition,
    pca_covariance_eigh,
    pca_full,
    pca_inverse_transform,
    pca_lanczos,
    pca_randomized,
    pca_transform,
    ppca_score_samples,
)
from latentlab.closed_form.whitening import (
    WHITENING_METHODS,
    Whitened,
    whiten,
    whitening_matrix,
)

__all__ = [
    "CCAFit",
    "KernelCCAFit",
    "fit_cca",
    "fit_kernel_cca",
    "cca_transform",
    "kernel_cca_transform",
    "KernelPCAFit",
    "fit_kernel_pca",
    "fit_preimage",
    "kernel_pca_transform",
    "preimage",
    "KERNELS",
    "KernelParams",
    "center_kernel",
    "center_test_kernel",
    "kernel_matrix",
    "PCADecomposition",
    "pca_covariance_eigh",
    "pca_full",
    "pca_inverse_transform",
    "pca_lanczos",
    "pca_randomized",
    "pca_transform",
    "ppca_score_samples",
    "WHITENING_METHODS",
    "Whitened",
    "whiten",
    "whitening_matrix",
]
