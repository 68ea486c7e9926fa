"""The demo code location in the Dagster UI: `dagster dev` on a free port, driven by headless
Chromium (Debian's build, through Playwright's driver), with screenshots saved.

Screenshots go to $DELTA_OPS_UI_SCREENSHOTS if set, else to the test's tmp directory.
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
import urllib.request
from pathlib import Path

import pytest

from tests.support import REPO

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
MAINTENANCE_ACTIONS = ("checkpoint", "log_cleanup", "vacuum", "row_tracking")
CHECKS = (
    "checkpoint_lag",
    "log_reconstructible",
    "writer_features_supported",
    "tombstone_backlog",
    "retention_properties_valid",
    "row_tracking_state",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(base: str, query: str) -> dict:
    request = urllib.request.Request(
        f"{base}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def dagster_ui(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    warehouse = tmp_path_factory.mktemp("warehouse")
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "DELTA_OPS_WAREHOUSE": str(warehouse)}
    dagster = Path(sys.executable).with_name("dagster")
    log = open(home / "dagster_dev.log", "w")  # noqa: SIM115 - held by the server process until teardown
    proc = subprocess.Popen(
        [str(dagster), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        status = None
        while time.monotonic() < deadline:
            try:
                data = _graphql(
                    base,
                    "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }",
                )
                entries = data["data"]["workspaceOrError"]["locationEntries"]
                status = entries[0]
                if status["loadStatus"] == "LOADED":
                    break
            except (OSError, KeyError, IndexError, ValueError):
                pass
            time.sleep(1)
        assert status is not None and status["loadStatus"] == "LOADED", (
            home / "dagster_dev.log"
        ).read_text()[-3000:]
        assert status["locationOrLoadError"]["__typename"] == "RepositoryLocation", status
        yield base, status["name"]
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


@pytest.fixture
def page(tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        yield page
        browser.close()


def _shots_dir(tmp_path: Path) -> Path:
    target = Path(os.environ.get("DELTA_OPS_UI_SCREENSHOTS", tmp_path))
    target.mkdir(parents=True, exist_ok=True)
    return target


def _dismiss_welcome(page) -> None:
    skip = page.get_by_role("button", name="Skip")
    if skip.count():
        skip.first.click()


def test_asset_graph_shows_pipeline_and_maintenance_assets(dagster_ui, page, tmp_path):
    base, location = dagster_ui
    page.goto(f"{base}/asset-groups", wait_until="networkidle")
    _dismiss_welcome(page)
    page.get_by_text("delta_maintenance").first.wait_for(timeout=60_000)
    page.screenshot(path=str(_shots_dir(tmp_path) / "global_lineage.png"), full_page=True)
    assert "pipeline" in page.content()  # the Spark pipeline's group feeds the maintenance group
    page.goto(
        f"{base}/locations/{location}/asset-groups/delta_maintenance", wait_until="networkidle"
    )
    _dismiss_welcome(page)
    page.get_by_text("log_cleanup").first.wait_for(timeout=60_000)
    shot = _shots_dir(tmp_path) / "asset_graph.png"
    page.screenshot(path=str(shot), full_page=True)
    html = page.content()
    for action in MAINTENANCE_ACTIONS:
        assert action in html, f"{action} missing from the asset graph"
    assert "events" in html
    assert shot.stat().st_size > 10_000


def test_table_asset_lists_the_maintenance_checks(dagster_ui, page, tmp_path):
    base, _ = dagster_ui
    page.goto(f"{base}/assets/events?view=checks", wait_until="networkidle")
    _dismiss_welcome(page)
    page.get_by_text("checkpoint_lag").first.wait_for(timeout=60_000)
    page.screenshot(path=str(_shots_dir(tmp_path) / "asset_checks.png"), full_page=True)
    html = page.content()
    for check in CHECKS:
        assert check in html, f"check {check} missing"


def test_vacuum_job_launchpad_offers_typed_config(dagster_ui, page, tmp_path):
    base, location = dagster_ui
    page.goto(
        f"{base}/locations/{location}/jobs/warehouse_vacuum_job/playground",
        wait_until="networkidle",
    )
    _dismiss_welcome(page)
    page.get_by_text("Launch Run").first.wait_for(timeout=60_000)
    page.get_by_text("dry_run").first.wait_for(timeout=30_000)
    page.screenshot(path=str(_shots_dir(tmp_path) / "vacuum_launchpad.png"), full_page=True)
    html = page.content()
    assert "warehouse_vacuum" in html
    assert "No errors" in html  # the scaffolded typed config is valid as it stands
    for field in ("dry_run", "force", "mode"):
        assert field in html, f"config field {field} not offered in the launchpad"
