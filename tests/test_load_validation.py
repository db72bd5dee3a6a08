"""``load`` checks a restored model against its class's description of its fitted state
(``latentlab._io_checks.FITTED_STATE``).

The crafted files below are the cases a fuzzer found loading without complaint and
failing later; each has a recomputed checksum (the checksum catches accidents, not
edits), and each must be refused by a ``ValueError`` naming the file and the attribute.
Genuine models, of every setting that changes what a fit stores, must still load.
"""

import inspect
import json
import tokenize
import zipfile

import numpy as np
import pytest
from estimator_recipes import COUNTS, LABELS, RECIPES, X, Y, y

import latentlab
from latentlab import io as lio
from latentlab._io_checks import FITTED_STATE


def _contents(path):
    with np.load(path) as archive:
        arrays = {k: archive[k] for k in archive.files}
    return json.loads(arrays.pop("__meta__").tobytes().decode()), arrays


def _write(path, meta, arrays):
    """A model file with the checksum recomputed as ``save`` computes it."""
    meta = {k: v for k, v in meta.items() if k != "sha256"}
    meta["sha256"] = lio._digest(meta, arrays)
    blob = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    with open(path, "wb") as f:
        np.savez(f, __meta__=blob, **arrays)


def _refusal(path) -> str:
    with pytest.raises(ValueError) as info:
        latentlab.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    return message


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Genuine files (the recipes' fits) of the classes the crafted files start from."""
    folder = tmp_path_factory.mktemp("genuine")
    paths = {}
    for name in (
        "PPCA",
        "Isomap",
        "MDS",
        "LocallyLinearEmbedding",
        "SpectralEmbedding",
        "SpectralClustering",
        "PLSRegression",
        "PLSCanonical",
        "GaussianRandomProjection",
        "NMF",
    ):
        settings, fit_args, _ = RECIPES[name]
        paths[name] = folder / f"{name}.npz"
        getattr(latentlab, name)(**settings).fit(*fit_args).save(paths[name])
    # one factor: the most four features identify (the Ledermann bound)
    paths["FactorAnalysis"] = folder / "FactorAnalysis.npz"
    latentlab.FactorAnalysis(1, random_state=0).fit(X).save(paths["FactorAnalysis"])
    return paths


def _crafted(saved, tmp_path, name, edit):
    meta, arrays = _contents(saved[name])
    edit(meta, arrays)
    path = tmp_path / "crafted.npz"
    _write(path, meta, arrays)
    return path


def _set_array(name, change):
    return lambda meta, arrays: arrays.update({name: change(arrays[name])})


def _set_scalar(name, value):
    return lambda meta, arrays: meta["scalars"].update({name: value})


def _set_first(name, value):
    def edit(meta, arrays):
        arrays[name] = arrays[name].copy()
        arrays[name].flat[0] = value

    return edit


# (class, edit of its file, the attribute the refusal must name): the fuzzer's cases
MEASURED = {
    "noise variance 1e-320": (
        "PPCA",
        _set_array("params_/sigma2", lambda v: 1e-320 + 0 * v),
        "params_/sigma2",
    ),
    "one FA variance 1e-320": ("FactorAnalysis", _set_first("params_/psi", 1e-320), "params_/psi"),
    "W x 1e200": ("PPCA", _set_array("params_/W", lambda v: v * 1e200), "params_/W"),
    "n_components 10**30": ("PPCA", _set_scalar("n_components_", 10**30), "n_components_"),
    "n_components 10**30, no per-class hook": (
        "GaussianRandomProjection",
        _set_scalar("n_components_", 10**30),
        "n_components_",
    ),
}


@pytest.mark.parametrize("case", sorted(MEASURED))
def test_measured_crafted_files_are_refused_naming_the_attribute(saved, tmp_path, case):
    name, edit, attribute = MEASURED[case]
    assert attribute in _refusal(_crafted(saved, tmp_path, name, edit))


@pytest.mark.parametrize(
    "source, target, attribute",
    [
        ("Isomap", "MDS", "n_components_"),
        ("LocallyLinearEmbedding", "Isomap", "dist_matrix_"),
        ("SpectralEmbedding", "SpectralClustering", "labels_"),
        ("PLSRegression", "PLSCanonical", "y_weights_"),  # same names: unit y weights
        ("PLSCanonical", "PLSRegression", "y_weights_"),  # y weights = y loadings
    ],
)
def test_relabelled_file_with_the_targets_settings_is_refused(
    saved, tmp_path, source, target, attribute
):
    """The class name and the settings say ``target``; the fitted state is
    ``source``'s.  Only the description of the fitted state can tell."""
    target_meta, _ = _contents(saved[target])

    def relabel(meta, arrays):
        meta["class"] = target
        meta["settings"] = target_meta["settings"]
        meta["unsaved_settings"] = target_meta["unsaved_settings"]

    assert attribute in _refusal(_crafted(saved, tmp_path, source, relabel))


@pytest.mark.parametrize(
    "name, edit, message",
    [
        # normal floats, but the covariance W W^T + noise is singular to float64
        (
            "PPCA",
            _set_array("params_/sigma2", lambda v: 1e-300 + 0 * v),
            "params_/sigma2 is negligible",
        ),
        ("FactorAnalysis", _set_first("params_/psi", 1e-300), "params_/psi is negligible"),
        # a small count that disagrees with the arrays
        ("PPCA", _set_scalar("n_components_", 3), "from n_components_"),
        ("FactorAnalysis", _set_scalar("n_features_in_", 5), "from n_features_in_"),
        ("PPCA", _set_array("params_/mu", lambda v: v.astype(np.int64)), "params_/mu has dtype"),
        ("PPCA", lambda m, a: a.update({"params_/extra": np.zeros(2)}), "params_/extra"),
        ("PPCA", _set_scalar("converged_", 1), "converged_ has dtype"),
        ("Isomap", _set_first("dist_matrix_", -1.0), "dist_matrix_ must be positive or zero"),
        # found by forging files: transform divides by sqrt(eigenvalue), and NMF's
        # transform forms H H^T
        ("Isomap", _set_first("eigenvalues_", 1e-320), "eigenvalues_ holds a subnormal"),
        (
            "NMF",
            _set_array("components_", lambda v: v * 1e200),
            "components_ has entries too large",
        ),
    ],
)
def test_values_a_fit_cannot_produce_are_refused(saved, tmp_path, name, edit, message):
    assert message in _refusal(_crafted(saved, tmp_path, name, edit))


def test_every_saveable_class_describes_its_fitted_state():
    classes = {n for n, c in lio._registry().items() if inspect.isclass(c)}
    assert set(FITTED_STATE) == classes


# -- parsing ----------------------------------------------------------------------------


def _archive(path, member: bytes):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("__meta__.npy", member)


def test_npy_header_that_breaks_numpys_parser_is_a_value_error_naming_the_file(tmp_path):
    """An unterminated string in a version 1.0 header sends NumPy to its Python 2
    fallback parser, whose tokenizer raised ``tokenize.TokenError`` out of load."""
    text = b"{'descr': '''<f8"
    header = text + b" " * (64 - 10 - len(text) - 1) + b"\n"
    path = tmp_path / "header.npz"
    _archive(path, b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header)
    with pytest.raises(ValueError, match="TokenError") as info:
        latentlab.load(path)
    assert str(info.value).startswith(f"{path}: ")
    assert isinstance(info.value.__cause__, tokenize.TokenError)


def test_metadata_number_past_the_int_digit_limit_is_a_value_error_naming_the_file(saved, tmp_path):
    meta, arrays = _contents(saved["PPCA"])
    text = json.dumps(meta).replace('"n_iter_": ', '"n_iter_": ' + "9" * 5000)  # > 4300 digits
    path = tmp_path / "digits.npz"
    with open(path, "wb") as f:
        np.savez(f, __meta__=np.frombuffer(text.encode(), np.uint8), **arrays)
    assert "corrupted metadata" in _refusal(path)


# -- genuine models ---------------------------------------------------------------------


def _streamed(cls, data, **settings):
    return lambda: cls(**settings).partial_fit(data[:20]).partial_fit(data[20:])


_UNSEEN_WORD = COUNTS.copy()
_UNSEEN_WORD[:20, 3] = 0  # the second chunk brings a word the first did not show


GENUINE = {
    "PPCA partial_fit": _streamed(latentlab.PPCA, X, n_components=2),
    "FactorAnalysis partial_fit": _streamed(latentlab.FactorAnalysis, X, n_components=1),
    "GaussianMixture tied, partial_fit": _streamed(
        latentlab.GaussianMixture, X, n_components=2, covariance_type="tied", random_state=0
    ),
    # the trace holds -inf: the topics gave the unseen word probability 0
    "PLSA partial_fit, -inf in the trace": _streamed(
        latentlab.PLSA, _UNSEEN_WORD, n_components=2, random_state=0
    ),
    "GaussianMixture diag": lambda: latentlab.GaussianMixture(
        2, covariance_type="diag", random_state=0
    ).fit(X),
    "GaussianMixture spherical, float32": lambda: latentlab.GaussianMixture(
        2, covariance_type="spherical", dtype="float32", random_state=0
    ).fit(X),
    "PPCA float32": lambda: latentlab.PPCA(2, dtype="float32", random_state=0).fit(X),
    "FactorAnalysis, no factor": lambda: latentlab.FactorAnalysis(0).fit(X),
    # Y fully explained after one component: the other weights are zero
    "PLSRegression, zero components": lambda: latentlab.PLSRegression(3).fit(X, 2 * X[:, :1]),
    "PLSCanonical svd, float32": lambda: latentlab.PLSCanonical(
        2, algorithm="svd", dtype="float32"
    ).fit(X, Y),
    "LinearDiscriminantAnalysis lsqr, two classes": lambda: latentlab.LinearDiscriminantAnalysis(
        solver="lsqr"
    ).fit(X, LABELS > 0),
    "FastICA without whitening": lambda: latentlab.FastICA(3, whiten=False, random_state=0).fit(X),
    "KernelPCA with its pre-image map": lambda: latentlab.KernelPCA(
        2, kernel="rbf", fit_inverse_transform=True
    ).fit(X),
    "SpectralEmbedding, sparse affinity": lambda: latentlab.SpectralEmbedding(2).fit(X),
    "SpectralClustering, sparse affinity": lambda: latentlab.SpectralClustering(
        2, affinity="nearest_neighbors", random_state=0
    ).fit(X),
    "MDS with landmarks": lambda: latentlab.MDS(2, n_landmarks=10, random_state=0).fit(X),
    "Autoencoder, linear hidden layer, early stopping": lambda: latentlab.Autoencoder(
        2, hidden_layer_sizes=(3,), activation="identity", early_stopping=True, max_iter=3
    ).fit(X),
    "VariationalAutoencoder, MLP decoder": lambda: latentlab.VariationalAutoencoder(
        2, hidden_layer_sizes=(3,), decoder="mlp", svi_steps=3, elbo_particles=2
    ).fit(X),
    "SupervisedPCA, one target": lambda: latentlab.SupervisedPCA(1, random_state=0).fit(X, y),
    "PPCA closed form": lambda: latentlab.PPCA(1, method="closed_form").fit(X),
}


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("case", sorted(GENUINE))
def test_genuine_models_of_every_fitted_state_load(tmp_path, case):
    est = GENUINE[case]()
    if "-inf" in case:
        assert np.isneginf(est.log_likelihoods_).any()
    est.save(tmp_path / "m.npz")
    loaded = latentlab.load(tmp_path / "m.npz")
    assert type(loaded) is type(est)
    assert sorted(vars(loaded)) == sorted(vars(est))
