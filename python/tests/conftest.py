"""Fixtures for the SDK and SandboxFusion tests: they run against the real daemon that
tests/integration/test_python.sh starts (SBX_HOST, SANDBOXD_SF_URL); every test checks that it
left no sandbox running."""
import os

import pytest

import sandboxd


def pytest_configure(config):
    if not os.environ.get("SBX_HOST"):
        raise pytest.UsageError("SBX_HOST is not set: run these through tests/integration/test_python.sh")


@pytest.fixture
def client():
    return sandboxd.Client()


@pytest.fixture(autouse=True)
def nothing_left_running():
    """After each test (even a failing one): no sandbox is still running; leftovers are ended
    and the test fails."""
    yield
    c = sandboxd.Client()
    left = [s["id"] for s in c.list() if s["state"] != "ended"]
    for sid in left:
        try:
            sb = sandboxd.Sandbox.open(sid, client=c)
            sb.terminate()
            sb.close()
        except sandboxd.SandboxdError:
            pass
    assert not left, f"sandboxes left running: {left}"
