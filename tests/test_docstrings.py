"""Shared docstring fragments (latentlab._docstrings): substituted where they are named,
indented as the text around them, and never left as placeholders in help text."""

import inspect
import pydoc
import re

import pytest

import latentlab
from latentlab._docstrings import FRAGMENTS, PLACEHOLDER, fill_doc, substitute


def test_fragment_line_is_replaced_and_indented_like_its_placeholder():
    doc = "Summary.\n\n    Parameters\n    ----------\n    {streaming_em_parameters}\n    tail\n"
    out = substitute(doc, rows_per_call="7 rows")
    lines = out.splitlines()
    start = lines.index("    verbose : int, default=0")
    assert lines[start + 1].startswith("        If > 0, print the EM objective every")
    assert lines[-1] == "    tail"
    # the inline value, and nothing of the placeholders left
    assert "(at most\n        7 rows per call)" in out
    assert PLACEHOLDER.search(out) is None
    # blank lines inside a fragment stay empty (no trailing indentation)
    tail = substitute("    {partial_fit_chunks}")
    assert "\n\n    Parameters\n    ----------\n" in tail
    assert all(line == line.rstrip() for line in tail.splitlines())


def test_unknown_placeholder_and_missing_value_are_refused_by_name():
    with pytest.raises(ValueError, match=r"\{no_such_fragment\}"):
        substitute("    {no_such_fragment}\n")
    with pytest.raises(ValueError, match=r"\{rows_per_call\}"):
        substitute("    {streaming_em_parameters}\n")  # its inline value not given

    @fill_doc
    def documented():
        """Ends with.

        {solver_attribute}
        """

    assert documented.__doc__.splitlines()[2] == "        solver_ : str"
    assert substitute(None) is None  # python -OO strips docstrings


def test_option_sets_and_exponents_are_not_placeholders():
    doc = 'method : {"em", "map"}\n    D^{-1/2} A D^{-1/2}, {0, 1}\n'
    assert substitute(doc) == doc


def _documented_objects():
    """Every exported object and the methods latentlab itself defines on it."""
    for name in latentlab.__all__:
        obj = getattr(latentlab, name)
        yield name, obj
        if inspect.isclass(obj):
            for attr, value in inspect.getmembers(obj):
                target = getattr(value, "fget", value)  # properties: their getter
                if (getattr(target, "__module__", None) or "").startswith("latentlab"):
                    yield f"{name}.{attr}", target


def test_no_placeholder_is_left_in_any_exported_docstring():
    left = {
        name: PLACEHOLDER.findall(obj.__doc__)
        for name, obj in _documented_objects()
        if isinstance(obj.__doc__, str) and PLACEHOLDER.search(obj.__doc__)
    }
    assert left == {}


@pytest.mark.parametrize(
    "estimator, fragment",
    [
        ("PPCA", "streaming_em_parameters"),
        ("FactorAnalysis", "streaming_em_attributes"),
        ("GaussianMixture", "streaming_em_attributes"),
        ("LocallyLinearEmbedding", "eigensolver_seed"),
        ("Isomap", "solver_attribute"),
    ],
)
def test_help_shows_the_fragment_text(estimator, fragment):
    text = pydoc.render_doc(getattr(latentlab, estimator), renderer=pydoc.plaintext)
    expected = FRAGMENTS[fragment].replace("{rows_per_call}", "")
    for line in expected.splitlines():  # each line of the fragment, as help() shows it
        assert line.strip().split("(at most")[0] in text


@pytest.mark.parametrize("estimator", ["PPCA", "FactorAnalysis", "GaussianMixture"])
def test_every_constructor_setting_is_documented(estimator):
    cls = getattr(latentlab, estimator)
    doc = inspect.getdoc(cls)
    section = doc.split("Parameters\n----------\n")[1].split("\n\nAttributes")[0]
    documented = set()
    for line in section.splitlines():
        if line and not line.startswith(" "):
            documented.update(re.split(r",\s*", line.split(" : ")[0]))
    assert set(inspect.signature(cls).parameters) <= documented
