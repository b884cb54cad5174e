import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetdeck.hostlist import (
    HostlistError,
    compress,
    did_you_mean,
    expand,
    looks_like_hostlist,
    natural_key,
    padded_forms,
    padded_twins,
)


def test_expand_ranges_and_padding():
    assert expand("gpu[0010-0012,0031]") == ["gpu0010", "gpu0011", "gpu0012", "gpu0031"]
    assert expand("gpu[008-010]") == ["gpu008", "gpu009", "gpu010"]
    assert expand("a1,b[1-2]x") == ["a1", "b1x", "b2x"]
    assert expand("gpu0001,gpu0001") == ["gpu0001"]


@pytest.mark.parametrize("bad", ["gpu[1-", "gpu[3-1]", "gpu[a-b]", "gpu[[1]]", "gpu[]",
                                 "gpu[0-99999999]"])
def test_expand_rejects(bad):
    with pytest.raises(HostlistError):
        expand(bad)


def test_compress():
    assert compress(["gpu0012"]) == "gpu0012"
    assert compress(["gpu0010", "gpu0011", "gpu0012", "gpu0031"]) == "gpu[0010-0012,0031]"
    assert compress(["login", "gpu2", "gpu1"]) == "gpu[1-2],login"


@given(st.sets(st.integers(min_value=0, max_value=9999), min_size=1, max_size=50))
def test_roundtrip(numbers):
    names = [f"gpu{n:04d}" for n in numbers]
    assert sorted(expand(compress(names))) == sorted(names)


def test_looks_like_hostlist():
    assert looks_like_hostlist("gpu[0010-0020]")
    assert not looks_like_hostlist("gpu00.*")
    assert not looks_like_hostlist("failed")


@pytest.mark.parametrize(("text", "reading"), [
    ("gpu00[34]", "hostlist gpu0034"),
    ("!gpu[0001-0004]", "all but hostlist"),
    # As typed already: a job's drill-down read "gpu[0001-0008] (hostlist gpu[0001-0008])".
    ("gpu[0001-0008]", "hostlist"),
    ("gpu[0001-0004,0005-0008]", "hostlist gpu[0001-0008]"),
    ("G12", "regex"),
    ("!G12", "all but regex"),
    ("", ""),
])
def test_a_filter_says_how_it_was_read_inverse_included(text, reading):
    """'!gpu000' read "(regex)": the view did not say it shows the rows NOT matching."""
    from fleetdeck.console.rows import NodeFilter

    assert NodeFilter(text).reading == reading


def test_a_backwards_range_says_the_range_to_write():
    """"range '10-1' runs backwards" said what is wrong, not what to type (a 3 a.m. run)."""
    with pytest.raises(HostlistError, match=r"^range '10-1' runs backwards: write it low to "
                                            r"high, gpu\[1-10\]$"):
        expand("gpu[10-1]")
    with pytest.raises(HostlistError, match=r"write it low to high, gpu\[0001-0010\]-ib$"):
        expand("gpu[0010-0001]-ib")


def test_a_name_typed_without_its_zero_padding_finds_its_twin():
    """gpu42 for gpu0042 (and GPU0042): the refusal names the node to type."""
    known = [f"gpu{n:04d}" for n in range(1, 65)] + ["login1"]
    assert padded_twins(["gpu42", "GPU0043", "gpu0044", "gpu99", "nfs1"], known) == {
        "gpu42": ["gpu0042"], "GPU0043": ["gpu0043"]}
    assert did_you_mean(["gpu42", "gpu43"], known) == "did you mean gpu[0042-0043]?"
    assert did_you_mean(["gpu99"], known) == ""
    assert did_you_mean(["login01"], known) == "did you mean login1?"


def test_a_name_with_two_padded_twins_is_told_both():
    """A fleet of two racks' schemes, gpu0042 and gpu00042: 'gpu42' may be either, and naming
    the one heard first sent the operator to drain a node they never meant."""
    known = ["gpu00042", "gpu0041", "gpu0042"]
    assert padded_twins(["gpu42"], known) == {"gpu42": ["gpu00042", "gpu0042"]}
    meant = did_you_mean(["gpu42"], known)
    assert "gpu0042" in meant and "gpu00042" in meant, meant
    # A name the fleet holds is never 'meant' as another, even with a twin beside it.
    assert did_you_mean(["gpu42"], ["gpu42", "gpu0042"]) == ""


def test_the_padded_forms_a_store_is_asked_for():
    assert padded_forms("gpu42", widest=5) == ["gpu042", "gpu0042", "gpu00042"]
    assert padded_forms("GPU0042", widest=4) == ["gpu42", "gpu042", "gpu0042"]
    assert padded_forms("login") == []


def test_natural_key_reads_numbers_as_numbers():
    names = ["leaf100", "leaf1000", "leaf99", "leaf01", "leaf601-r10", "leaf601-r3", "(no leaf)"]
    assert sorted(names, key=natural_key) == ["(no leaf)", "leaf01", "leaf99", "leaf100",
                                              "leaf601-r3", "leaf601-r10", "leaf1000"]


def test_natural_key_orders_names_that_read_alike_as_numbers_one_way():
    """``leaf01`` and ``leaf1`` (a padded and an unpadded name of one number) had equal keys,
    so their order was the order they came in: the fabric matrix and the switch table could
    list them either way from one refresh or console to the next."""
    names = ["leaf1", "leaf01", "rack2-row10", "rack02-row10", "rack2-row9"]
    want = ["leaf01", "leaf1", "rack2-row9", "rack02-row10", "rack2-row10"]
    assert sorted(names, key=natural_key) == want
    assert sorted(reversed(names), key=natural_key) == want
    assert natural_key("leaf01") != natural_key("leaf1")
