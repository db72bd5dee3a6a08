"""Batched SPD inverses for the E-steps, against NumPy's LAPACK inverse and slogdet."""

import jax
import numpy as np
import pytest

from latentlab.models._linalg import GAUSS_JORDAN_MAX_SIZE, solve_refined, spd_inverse_columns


@pytest.mark.parametrize("K", [1, 5, GAUSS_JORDAN_MAX_SIZE, GAUSS_JORDAN_MAX_SIZE + 5])
def test_inverse_and_logdet_match_numpy(K):
    """Both strategies (Gauss-Jordan up to the size limit, Cholesky above), on
    matrices with condition numbers up to ~1e6."""
    rng = np.random.default_rng(K)
    n = 37
    Q = np.linalg.qr(rng.normal(size=(n, K, K)))[0]
    spectrum = np.exp(rng.uniform(0.0, np.log(1e6), size=(n, K)))
    A = np.einsum("nij,nj,nkj->nik", Q, spectrum, Q)
    A = 0.5 * (A + np.swapaxes(A, 1, 2))
    b = rng.normal(size=(n, K))
    with jax.enable_x64(True):
        A_last = np.moveaxis(A, 0, -1)
        inverse, logdet = spd_inverse_columns(A_last)
        x = np.asarray(solve_refined(A_last, inverse, b.T)).T
        inverse = np.moveaxis(np.asarray(inverse), -1, 0)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(A)[1], rtol=1e-12, atol=1e-10)
    expected = np.linalg.inv(A)
    scale = np.max(np.abs(expected), axis=(1, 2), keepdims=True)
    np.testing.assert_allclose(inverse / scale, expected / scale, atol=1e-9)
    # refined solutions have small backward error, like a LAPACK solve's
    residual = np.einsum("nij,nj->ni", A, x) - b
    assert np.max(np.abs(residual)) < 1e-8 * np.max(np.abs(b))
