import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetdeck.hostlist import HostlistError, compress, expand, looks_like_hostlist


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
    ("!gpu[0001-0004]", "all but hostlist gpu[0001-0004]"),
    ("G12", "regex"),
    ("!G12", "all but regex"),
    ("", ""),
])
def test_a_filter_says_how_it_was_read_inverse_included(text, reading):
    """'!gpu000' read "(regex)": the view did not say it shows the rows NOT matching."""
    from fleetdeck.console.rows import NodeFilter

    assert NodeFilter(text).reading == reading
