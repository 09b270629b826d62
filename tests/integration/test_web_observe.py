"""``lbctl run --web-service-port`` seen the way an operator sees it: a real Prometheus server
scrapes ``/metrics`` and answers PromQL, ``promtool`` checks the exposition, and headless Chromium
opens the dashboard, with token authentication off and on (logging in with a token first): the
first paint already shows the cluster, every broker's chart has its axes and the shedder's
threshold, a move appears as it happens under the CLI's word, a split's tiny bundle can be
clicked, explain is a table, the "why not" panel gives the skips with their numbers.

One cluster per case: ``lbctl run --keep`` in a subprocess, its workload running; moves and splits
are forced through the same service's admin REST API (Pulsar's paths, as a user would). The tools
come from ``make web-tools`` (Debian's prometheus, chromium, chromium-driver); a missing one fails
its test naming the program and the command that installs it.

``BB_DASHBOARD_PNG=docs/img/dashboard.png`` keeps the screenshot of the dashboard with
authentication on, after the login, there (the README's and docs/operations.md's).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from balancer.bundles import namespace_of
from tests.integration.ray_scenarios import read_until_kept
from web.observe.pulsar_names import FAMILIES

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
LBCTL = str(Path(sys.executable).parent / "lbctl")
NS = "public/default"
BROKERS = ("broker-1", "broker-2", "broker-3")


def tool(name: str) -> str:
    found = shutil.which(name) or (f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)
    if found is None:
        pytest.fail(f"{name} is not installed: `make web-tools` installs it (apt-get install "
                    "prometheus chromium chromium-driver, as root)")
    return found


@dataclass
class Served:
    url: str
    host: str
    token: str | None = None
    """A super-user's token when the service checks tokens."""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def state(self) -> dict[str, Any]:
        return json.loads(_get(f"{self.url}/bb/v1/dashboard/state", self.headers()) or "{}")

    def transfer(self, avoid: set[str] | None = None) -> tuple[str, str, str]:
        """Transfer an owned bundle to another broker through the admin REST API (Pulsar's
        ``PUT .../{bundle}/unload?destinationBroker=``); (bundle id, from, to). The cluster sheds
        load meanwhile: a bundle that moved between the look and the unload (409) is looked at again."""
        for attempt in range(5):
            owned = next(b for b in self.state()["namespaces"][0]["bundles"]
                         if b["state"] == "Owned" and b["bundle"] not in (avoid or set()))
            dst = next(b for b in BROKERS if b != owned["owner"])
            bundle_range = owned["bundle"].rsplit("/", 1)[1]
            try:
                self.put(f"/admin/v2/namespaces/{NS}/{bundle_range}/unload?destinationBroker={dst}")
                return owned["bundle"], owned["owner"], dst
            except urllib.error.HTTPError as exc:
                if exc.code != 409 or attempt == 4:
                    raise
                time.sleep(1)
        raise AssertionError("unreachable")

    def split_off_a_sliver(self, avoid: str) -> str:
        """Split an owned bundle 256 hash positions above its lower end: the new lower child is
        1/2^24 of the hash space (a 0 px slice of a proportional strip); its id."""
        for attempt in range(5):
            owned = next(b for b in self.state()["namespaces"][0]["bundles"]
                         if b["state"] == "Owned" and b["bundle"] != avoid)
            try:
                self.put(f"/admin/v2/namespaces/{NS}/{owned['bundle'].rsplit('/', 1)[1]}/split"
                         "?unload=false&splitAlgorithmName=specified_positions_divide",
                         [owned["lower"] + 256])
                return f"{NS}/0x{owned['lower']:08x}_0x{owned['lower'] + 256:08x}"
            except urllib.error.HTTPError as exc:
                if exc.code != 409 or attempt == 4:
                    raise
                time.sleep(1)
        raise AssertionError("unreachable")

    def put(self, path: str, body: Any = None) -> None:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method="PUT",
                                         headers={**self.headers(), "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.status == 204


def start_run(host: str, tmp: Path, conf: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """``lbctl run --web-service-port 0 --keep`` (in process: a virtual clock at --speed 60; Ray:
    an actor per body) until it prints ``kept:``; the process and the service's URL."""
    err = tmp / "run.err"
    run = subprocess.Popen([LBCTL, "run", "--host", host, "--web-service-port", "0", "--keep",
                            "--minutes", "10", "--speed", "60", "--topics", "300", "--bundles", "8",
                            "--plain", "--state-dir", str(tmp / "state"),
                            *(["--conf", str(conf)] if conf is not None else [])],
                           stdout=subprocess.PIPE, stderr=err.open("w"), text=True, cwd=ROOT,
                           env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    out = read_until_kept(run, timeout_s=300)
    if "kept:" not in out:
        run.kill()
        raise AssertionError(out + err.read_text()[-3000:])
    return run, next(line.split()[-1] for line in out.splitlines() if line.startswith("web service:"))


def stop_run(run: subprocess.Popen[str]) -> None:
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=90) == 0


@pytest.fixture(scope="module", params=["inproc", pytest.param("ray", marks=pytest.mark.ray)])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The cluster, its workload and its open service (no authentication) on each host."""
    run, url = start_run(request.param, tmp_path_factory.mktemp("web"))
    try:
        yield Served(url, request.param)
    finally:
        stop_run(run)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The same on the in-process host with Pulsar's token authentication and authorisation on
    (broker.conf's keys, an HS256 key made by ``lbctl tokens``); its super-user's token."""
    tmp = tmp_path_factory.mktemp("secured")
    key = tmp / "secret.key"
    subprocess.run([LBCTL, "tokens", "create-secret-key", "--output", str(key)], check=True)
    token = subprocess.run([LBCTL, "tokens", "create", "-sk", f"file://{key}", "-s", "admin"], check=True,
                           capture_output=True, text=True).stdout.strip()
    conf = tmp / "broker.conf"
    conf.write_text((ROOT / "conf" / "broker.conf").read_text() + "authenticationEnabled=true\n"
                    "authorizationEnabled=true\nsuperUserRoles=admin\nauthenticationProviders="
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
                    f"tokenSecretKey=file://{key}\n")
    run, url = start_run("inproc", tmp, conf)
    try:
        yield Served(url, "inproc", token)
    finally:
        stop_run(run)


def until(what: str, probe: Callable[[], Any], timeout_s: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.5)
    pytest.fail(f"{what}: not seen within {timeout_s:g} s (last: {last!r})")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- Prometheus ------------------------------------------------------------------------------

@pytest.fixture
def prometheus(served: Served, tmp_path: Path) -> Iterator[str]:
    binary, port = tool("prometheus"), free_port()
    target = urllib.parse.urlsplit(served.url).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text("global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
                      f"scrape_configs:\n- job_name: bundle-balancer\n  static_configs:\n"
                      f"  - targets: ['{target}']\n")
    log = (tmp_path / "prometheus.log").open("w")
    server = subprocess.Popen([binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                               f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
    api = f"http://127.0.0.1:{port}"
    try:
        until("prometheus ready", lambda: _get(f"{api}/-/ready") is not None, 60)
        yield api
    finally:
        server.terminate()
        server.wait(timeout=30)


def _get(url: str, headers: dict[str, str] | None = None) -> str | None:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return str(response.read().decode())
    except OSError:
        return None


def promql(api: str, query: str) -> float | None:
    """The value of a scalar-like query (a sum), None while it has no sample."""
    body = _get(f"{api}/api/v1/query?{urllib.parse.urlencode({'query': query})}")
    result = json.loads(body)["data"]["result"] if body else []
    return float(result[0]["value"][1]) if result else None


ADMIN_UNLOADS = 'sum(pulsar_lb_unload_broker_breakdown_total{result="Success",reason="Admin"})'
PULSAR_LINT = ("metric names should be written in 'snake_case' not 'camelCase'",
               "metric names should not contain abbreviated units",
               'non-counter metrics should not have "_total" suffix',
               'non-histogram and non-summary metrics should not have "_count" suffix')
"""What ``promtool check metrics`` says of Pulsar's own names (``directMemory``, ``_ms``, a gauge
ending ``_total``, and with ``exposeBundlesMetricsInPrometheus`` one ending ``_count``): kept as
Pulsar spells them, so its dashboards find them."""


def test_prometheus_counts_the_unloads_the_test_forced(served: Served, prometheus: str) -> None:
    until("a first scrape", lambda: promql(prometheus, ADMIN_UNLOADS) is not None)
    before = promql(prometheus, ADMIN_UNLOADS)  # Pulsar's breakdown starts every key at 0
    assert before is not None
    first, _, _ = served.transfer()
    served.transfer(avoid={first})
    until("two more admin unloads in Prometheus", lambda: promql(prometheus, ADMIN_UNLOADS) == before + 2)
    assert (promql(prometheus, "sum(pulsar_lb_unload_bundle_total)") or 0) >= 2
    assert promql(prometheus, 'count(pulsar_lb_directMemory_usage{metric="loadBalancing"})') == len(BROKERS)
    until("the unloads timed", lambda: (promql(prometheus, "sum(brk_lb_unload_latency_ms_count)") or 0) >= 2)
    assert (promql(prometheus, "sum(brk_lb_unload_latency_ms_sum)") or 0) > 0
    assert (promql(prometheus, "max(bb_leader_epoch)") or 0) >= 1
    if served.host == "ray":  # one exporter, every actor: each one's fold position, asked of it
        until("every actor's fold position", lambda: promql(
            prometheus, 'count(bb_fold_position{actor=~"leader|ns:0|broker:broker-.*"})') == 5)

    exposition = _get(f"{served.url}/metrics")
    assert exposition is not None
    checked = subprocess.run([tool("promtool"), "check", "metrics"], input=exposition,
                             capture_output=True, text=True, timeout=60)
    findings = [line.split(" ", 1) for line in (checked.stdout + checked.stderr).splitlines()]
    pulsars = {family.name for family in FAMILIES}
    assert findings and all(name in pulsars and problem in PULSAR_LINT for name, problem in findings), findings
    assert checked.returncode in (0, 3)  # 3: lint findings only, the exposition parses


# -- the dashboard in a real browser -----------------------------------------------------------

@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = tool("chromium")
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(tool("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()


def test_the_dashboard_shows_every_broker_and_a_move_as_it_happens(served: Served, browser: Any,
                                                                   tmp_path: Path) -> None:
    browser.get(served.url + "/")
    first_paint(browser, tmp_path)
    walk_the_dashboard(served, browser)
    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    assert_not_blank(shot)


def test_with_auth_on_the_dashboard_takes_a_login_then_works(secured: Served, browser: Any,
                                                             tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    assert secured.token is not None
    browser.get(secured.url + "/")
    until("the login form", lambda: browser.current_url.endswith("/login"))

    def log_in(given: str) -> None:
        field = browser.find_element(By.ID, "token")
        field.clear()
        field.send_keys(given)
        browser.find_element(By.CSS_SELECTOR, "#login-form button").click()

    def refusal() -> str:  # the form posts and a new page comes: wait for it, not for the click
        from selenium.common.exceptions import StaleElementReferenceException

        try:
            found = browser.find_elements(By.ID, "login-message")
            return str(found[0].text) if found else ""
        except StaleElementReferenceException:
            return ""  # the old page went away while it was read

    log_in("not-a-token")
    until("the login's refusal", lambda: "does not verify" in refusal())
    assert browser.get_cookies() == []  # a refused token starts no session
    log_in("token:" + secured.token)  # client.conf's authParams form
    # The click returns before the dashboard replaces the login page: wait for it to load.
    until("the dashboard after the login", lambda: not browser.current_url.endswith("/login")
          and page(browser, "return document.readyState") == "complete")
    first_paint(browser, tmp_path)
    cookie = next(c for c in browser.get_cookies() if c["name"] == "bb_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert browser.execute_script("return document.cookie") == ""  # no script can read it
    walk_the_dashboard(secured, browser)
    # The docs' picture: scrolled to the top, with the explain of a shedder's transfer (its
    # figures and placement scores) when the run made one by now, else of the forced one.
    shed = "return [...document.querySelectorAll('tr.move')].find(r => r.cells[5].textContent === 'Overloaded')"
    if page(browser, shed + " !== undefined"):
        page(browser, shed + ".click()")
        until("the shedder's figures in the explain", lambda: page(
            browser, "return document.querySelectorAll('#explain tr.placement').length > 0"), 30)
    browser.set_window_size(1280, 1280)
    browser.execute_script("window.scrollTo(0, 0)")
    shot = tmp_path / "dashboard.png"
    assert browser.save_screenshot(str(shot))
    assert_not_blank(shot)
    keep = os.environ.get("BB_DASHBOARD_PNG")
    if keep:
        (ROOT / keep).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, ROOT / keep)

    browser.find_element(By.CSS_SELECTOR, "#logout button").click()
    until("the login form after logging out", lambda: browser.current_url.endswith("/login"))
    assert browser.get_cookies() == []
    browser.get(secured.url + "/bb/v1/dashboard/state")
    assert "Authentication required" in browser.find_element(By.TAG_NAME, "body").text


def page(browser: Any, script: str, *args: str) -> Any:
    """Read the page in the page, in one script: it redraws with every push (no stale node)."""
    return browser.execute_script(script, *args)


def first_paint(browser: Any, tmp_path: Path) -> None:
    """As loaded, before any event of the feed: the brokers the service knows, their charts and
    the strip are drawn (on Ray its view may not have every registration yet: then the feed
    brings the rest)."""
    cards = "return [...document.querySelectorAll('.broker')].map(e => e.dataset.broker)"
    assert set(page(browser, cards)) & set(BROKERS)
    assert page(browser, "return document.querySelectorAll('.strip .bundle').length") >= 8
    shot = tmp_path / "first-paint.png"
    assert browser.save_screenshot(str(shot))
    assert_not_blank(shot)
    until("every broker on the page", lambda: sorted(page(browser, cards)) == list(BROKERS))


def walk_the_dashboard(served: Served, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    until("the live feed", lambda: page(browser, "return document.getElementById('link').textContent") == "live")
    ticks = "return [...document.querySelectorAll('.broker svg.usage .tick')].map(t => t.textContent)"
    until("the charts' axes", lambda: {"0%", "50%", "100%"} <= set(page(browser, ticks)))
    threshold = "return [...document.querySelectorAll('.broker svg.usage .threshold-label')].map(t => t.textContent)"
    until("the shedder's threshold on every chart", lambda: len(page(browser, threshold)) == len(BROKERS)
          and all("ThresholdShedder threshold" in t for t in page(browser, threshold)))
    why = "return [...document.querySelectorAll('#whynot .whynot')].map(e => e.textContent)"
    until("the skips in the why-not panel", lambda: any(
        "skipped" in t and "highest" in t and "loadBalancerBrokerThresholdShedderPercentage=10" in t
        for t in page(browser, why)))

    bundle, src, dst = served.transfer()
    rows = ("return [...document.querySelectorAll('tr.move')].filter(r => r.dataset.bundle === arguments[0])"
            ".map(r => [...r.cells].map(c => c.textContent))")
    until(f"the transfer of {bundle} from {src} to {dst}", lambda: any(
        row[1:] == ["transfer", bundle, src, dst, "admin"] for row in page(browser, rows, bundle)), 60)

    sliver = served.split_off_a_sliver(avoid=bundle)
    strip = "return document.querySelector(`.strip .bundle[data-bundle='${arguments[0]}']`)"
    until(f"the split's sliver {sliver} in the strip", lambda: page(browser, strip, sliver))
    widths = "return [...document.querySelectorAll('.strip .bundle')].map(e => e.getBoundingClientRect().width)"
    assert min(page(browser, widths)) >= 7.5  # every bundle can be clicked, the sliver too
    until("a click on the sliver", lambda: page(browser, f"const e = ({strip[7:]}); if (e) e.click(); return !!e",
                                                sliver))
    until("the sliver's explain", lambda: sliver in browser.find_element(By.ID, "explain-bundle").text
          and "version" in browser.find_element(By.ID, "explain").text)

    until("a click on the transferred bundle", lambda: page(
        browser, f"const e = ({strip[7:]}); if (e) e.click(); return !!e", bundle))
    explained = ("return [...document.querySelectorAll('#explain tr.explain-move')]"
                 ".map(r => [...r.cells].map(c => c.textContent))")
    until("the explain table of the transfer", lambda: any(
        row[2:5] == ["transfer", src, dst] and row[6].lower() == "admin" for row in page(browser, explained)))


def assert_not_blank(png: Path) -> None:
    """Many distinct colours and no single one covering almost everything."""
    import numpy as np
    from matplotlib import image

    pixels = (image.imread(str(png))[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours, counts = np.unique(pixels, axis=0, return_counts=True)
    assert len(colours) > 50, f"{len(colours)} distinct colours"
    assert counts.max() / len(pixels) < 0.9, "one colour covers nearly the whole screenshot"


def test_the_dashboard_strip_shows_the_balancer_paused_and_resumed(served: Served, browser: Any) -> None:
    def strip() -> tuple[str, str]:
        found = browser.execute_script("const e = document.getElementById('balancer');"
                                       "return e ? [e.dataset.state, e.textContent] : ['', '']")
        return str(found[0]), str(found[1])

    def post(path: str, body: dict[str, str]) -> Any:
        request = urllib.request.Request(served.url + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read().decode())

    browser.get(served.url + "/")
    until("the balancer's state on the strip", lambda: strip()[0] in ("idle", "executing", "stalled"))
    paused = post("/bb/v1/balancer/pause", {"for": "30m", "reason": "dashboard check"})
    try:
        assert paused["by"] == "anonymous"
        until("the pause on the strip", lambda: strip()[0] == "paused" and "dashboard check" in strip()[1])
        assert "by anonymous" in strip()[1] and "caps 2/broker" in strip()[1]
    finally:
        post("/bb/v1/balancer/resume", {})
    until("the end of the pause on the strip", lambda: strip()[0] != "paused")


@pytest.fixture(scope="module")
def reviewed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``secured``'s cluster in review mode: each shedding run's proposal waits for an approval
    (an hour between runs and a day's age, so one waits while the browser looks)."""
    tmp = tmp_path_factory.mktemp("reviewed")
    key = tmp / "secret.key"
    subprocess.run([LBCTL, "tokens", "create-secret-key", "--output", str(key)], check=True)
    token = subprocess.run([LBCTL, "tokens", "create", "-sk", f"file://{key}", "-s", "admin"], check=True,
                           capture_output=True, text=True).stdout.strip()
    conf = tmp / "broker.conf"
    conf.write_text((ROOT / "conf" / "broker.conf").read_text() + "authenticationEnabled=true\n"
                    "authorizationEnabled=true\nsuperUserRoles=admin\nauthenticationProviders="
                    "org.apache.pulsar.broker.authentication.AuthenticationProviderToken\n"
                    f"tokenSecretKey=file://{key}\nloadBalancerExecution=review\n"
                    "loadBalancerProposalMaxAgeSeconds=86400\nloadBalancerProposalLoadTolerance=1000\n")
    run, url = start_run("inproc", tmp, conf)
    try:
        yield Served(url, "inproc", token)
    finally:
        stop_run(run)


def test_a_super_user_approves_a_waiting_proposal_on_the_dashboard(reviewed: Served, browser: Any) -> None:
    from selenium.webdriver.common.by import By

    assert reviewed.token is not None
    browser.get(reviewed.url + "/")
    until("the login form", lambda: browser.current_url.endswith("/login"))
    browser.find_element(By.ID, "token").send_keys(reviewed.token)
    browser.find_element(By.CSS_SELECTOR, "#login-form button").click()
    waiting = "return [...document.querySelectorAll('#proposals .proposal')].map(e => e.dataset.proposal)"
    found = until("a waiting proposal with its buttons", lambda: page(browser, waiting), 180)
    chosen = str(found[0])
    assert page(browser, "return document.querySelectorAll('#proposals .proposal button.approve').length") >= 1
    page(browser, "document.querySelector(`#proposals .proposal[data-proposal='${arguments[0]}'] "
                  "button.approve`).click()", chosen)
    verdict = "return [...document.querySelectorAll('#proposals .verdict')].map(e => e.textContent)"
    shown = until("the verdict on the card", lambda: page(browser, verdict), 60)
    assert any(text in (f"{chosen}: approved by admin",) or "is stale" in text for text in shown), shown
    recorded = json.loads(_get(f"{reviewed.url}/bb/v1/proposals/{chosen}", reviewed.headers()) or "{}")
    assert recorded["status"] in ("approved", "executed", "stale")
    if recorded["status"] != "stale":
        assert recorded["by"] == "admin"


@pytest.mark.ray
def test_review_mode_on_ray_a_proposal_waits_then_runs_once_approved(tmp_path: Path) -> None:
    """The same leader on the Ray host: a proposal waits in review mode (a shedding one, or a
    split when the load happens to be even), the REST approval is recorded (``anonymous``: no
    token checked) and its moves run: the shed bundles start moving, the split bundle is split."""
    conf = tmp_path / "broker.conf"
    conf.write_text((ROOT / "conf" / "broker.conf").read_text() + "loadBalancerExecution=review\n"
                    "loadBalancerProposalMaxAgeSeconds=86400\nloadBalancerProposalLoadTolerance=1000\n")
    run, url = start_run("ray", tmp_path, conf)
    try:
        def waiting() -> list[dict[str, Any]]:
            found = json.loads(_get(f"{url}/bb/v1/proposals") or "[]")
            return sorted((p for p in found if p["status"] == "pending"), key=lambda p: not p["id"].startswith("shed-"))

        chosen = until("a waiting proposal", waiting, 240)[0]["id"]
        moves = json.loads(_get(f"{url}/bb/v1/proposals/{chosen}") or "{}")["moves"]
        # A waiting plan stands while the next cycles plan the same moves: the approval finds it.
        request = urllib.request.Request(f"{url}/bb/v1/proposals/{chosen}/approve", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read().decode())
        assert answer["event"] == "ProposalApproved" and answer["by"] == "anonymous"
        if chosen.startswith("shed-"):
            def started() -> bool:
                shown = json.loads(_get(f"{url}/bb/v1/proposals/{chosen}") or "{}")
                return bool(shown.get("started"))

            until("the approved proposal's moves started", started, 120)
            return
        split = {m["bundle"] for m in moves}

        def gone() -> bool:
            namespaces = {namespace_of(b) for b in split}
            left = {f"{ns}/{row['range']}" for ns in namespaces
                    for row in json.loads(_get(f"{url}/bb/v1/namespaces/{ns}/bundles") or "{}")["bundles"]}
            return not split & left

        until("the approved split's bundles split", gone, 120)
    finally:
        stop_run(run)
