"""The Fleet proxy (``deploy/fleet_proxy.sh``, nginx) in front of the session's TLS SuperLink.

The session's deployment stack (``conftest.deployment``) starts it where nginx is installed, and
its SuperNodes connect through it: every deployment test then trains through the proxy, with
SuperNode authentication (``test_deployment.py``: a run equal to the in-process one; a node
with an unregistered key refused). Here, what a party reaches at that address: the Fleet API
and nothing else; ``flwr run`` from a party's machine is refused.
"""

from __future__ import annotations

import ssl
import subprocess
import urllib.error
import urllib.request

import pytest

from flower_procs import FLEET_PROXY, REPO, run_process, tool


@pytest.fixture
def proxied(deployment):
    if deployment.fleet_proxy is None:
        pytest.skip("nginx is not installed (apt-get install nginx): no Fleet proxy to test")
    return deployment


def status(stack, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> int:
    """The HTTP status of ``method path`` at the proxy, over verified TLS."""
    context = ssl.create_default_context(cafile=stack.tls.ca)
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=context)
    )
    url = f"https://{stack.fleet_address}{path}"
    data = body if method == "POST" else None
    try:
        request = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
        with opener.open(request, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as error:
        return error.code


@pytest.mark.heavy  # the deployment stack (a SuperLink, SuperNodes)
def test_the_proxy_serves_parties_the_fleet_api_only(proxied):
    refused = [
        ("POST", "/v1/control/start-run"),
        ("POST", "/v1/control/list-runs"),
        ("POST", "/v1/control/register-node"),
        ("POST", "/v1/runtime/get-nodes"),
        ("GET", "/health"),
        ("GET", "/v1/fleet/pull-messages"),  # the Fleet API's calls are POSTs
        ("POST", "/v1/fleet/../control/list-runs"),
        ("POST", "/v1/fleet/%2e%2e/control/list-runs"),
        ("POST", "//v1/control/list-runs"),
        ("POST", "/v1/fleet"),
    ]
    assert {f"{m} {p}": status(proxied, m, p) for m, p in refused} == {
        f"{m} {p}": 403 for m, p in refused
    }
    # A Fleet call reaches the SuperLink, which answers for itself (an empty body: not a
    # protobuf request), and the SuperNodes' own calls went through the proxy.
    assert status(proxied, "POST", "/v1/fleet/pull-messages") not in (403, 502)
    # Bodies of any size pass (arrays travel in 5 MB chunks; the FAB may reach 10 MB).
    protobuf = {"Content-Type": "application/protobuf"}  # so that the SuperLink reads it all
    big = status(proxied, "POST", "/v1/fleet/push-object", b"\0" * (12 << 20), protobuf)
    assert big not in (403, 413, 502), big
    log = (proxied.workdir / "fleet-proxy" / "access.log").read_text()
    assert log.count('"POST /v1/fleet/activate-node HTTP/1.1" 200') >= 2, log
    assert '"POST /v1/fleet/pull-messages HTTP/1.1" 200' in log, log
    # No call outside the Fleet API was ever answered other than 403 (this test's, flwr run's).
    others = [line for line in log.splitlines() if "/v1/fleet/" not in line.split('"')[1]]
    assert others and all('HTTP/1.1" 403 ' in line for line in others), others


@pytest.mark.extended  # 20 s of CLI start-up; the test above refuses its request (start-run)
def test_flwr_run_from_a_party_is_refused(proxied, tmp_path):
    """A party's ``flwr`` CLI, pointed at the address its SuperNode uses, cannot submit a run."""
    home = tmp_path / "party-flwr-home"
    home.mkdir()
    (home / "config.toml").write_text(
        '[superlink]\ndefault = "parties"\n\n[superlink.parties]\n'
        f'address = "{proxied.fleet_address}"\nroot-certificates = "{proxied.tls.ca}"\n'
    )
    env = {**proxied.env, "FLWR_HOME": str(home)}
    done = run_process([tool("flwr"), "run", ".", "parties"], env=env, cwd=REPO, timeout=120)
    output = done.stdout + done.stderr
    assert "Successfully started run" not in output, output
    assert "403 Forbidden" in output, output


def test_the_proxy_script_names_what_is_missing(tmp_path):
    done = subprocess.run(
        ["bash", str(FLEET_PROXY), str(tmp_path / "proxy"), "--tls", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2
    assert "--cert" in done.stderr and "is not a readable file" in done.stderr, done.stderr
