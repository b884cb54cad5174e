import pytest

from tests.security.deploy import secured_broker


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """The shipped broker setup, one per test module (tests/security/deploy.py)."""
    with secured_broker(tmp_path_factory.mktemp("secure")) as setup:
        yield setup
