"""The demo code location in the Dagster UI: `dg dev` (Dagster's current CLI, reading the
project's [tool.dg]) on a free port, driven by headless Chromium (Debian's build, through
Playwright's driver), with screenshots saved. A vacuum is launched from the launchpad with a
human duration and its result read back from the table asset's page.

The demo's maintenance (`scripts/demo.py`: the schedule's tick, then the maintenance asset job
it requests) is run into the server's instance, and its results are found on the maintenance
assets' pages.

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

import pyarrow as pa
import pytest

from delta_ops.dagster.checks import CHECKS as CHECK_DESCRIPTIONS
from delta_ops.table.writer import write_arrow
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
#: the demo table's maintenance assets (row tracking is not enabled on it: no asset)
MAINTENANCE_ACTIONS = ("checkpoint", "cleanup", "vacuum")
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
def ui_dirs(tmp_path_factory) -> tuple[Path, Path]:
    """The server's Dagster home and the demo location's warehouse."""
    return tmp_path_factory.mktemp("dagster_home"), tmp_path_factory.mktemp("warehouse")


@pytest.fixture(scope="module")
def dagster_ui(ui_dirs):
    home, warehouse = ui_dirs
    # the demo's table, written without Spark: a vacuum launched from the UI has a table to read
    write_arrow(
        warehouse / "events",
        pa.table({"user_id": pa.array([1, 2, 3], pa.int64()), "day": ["a", "a", "b"]}),
        partition_by=["day"],
    )
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "DELTA_OPS_WAREHOUSE": str(warehouse)}
    dg_cli = Path(sys.executable).with_name("dg")
    log = open(home / "dagster_dev.log", "w")  # noqa: SIM115 - held by the server process until teardown
    proc = subprocess.Popen(
        [str(dg_cli), "dev", "--host", "127.0.0.1", "--port", str(port)],
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
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop `dg dev` and its process group as Ctrl-C does (it shuts its webserver, daemon and
    code server down on SIGINT; SIGTERM left it waiting out the 30 s timeout), killing
    whatever is left after that."""
    for sig, wait_s in ((signal.SIGINT, 20), (signal.SIGKILL, 10)):
        os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


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


def _dismiss_welcome(page, wait_ms: int = 0) -> None:
    """Close Dagster's "Join the community" dialog, waiting up to `wait_ms` for it to open."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    skip = page.get_by_role("button", name="Skip")
    if wait_ms:
        try:
            skip.first.wait_for(timeout=wait_ms)
        except PlaywrightTimeout:
            return
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
    page.get_by_text("cleanup").first.wait_for(timeout=60_000)
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


def test_vacuum_launched_from_the_launchpad_with_a_human_duration(dagster_ui, page, tmp_path):
    base, location = dagster_ui
    shots = _shots_dir(tmp_path)
    page.goto(
        f"{base}/locations/{location}/jobs/warehouse_vacuum_job/playground",
        wait_until="networkidle",
    )
    _dismiss_welcome(page)
    page.get_by_text("Launch Run").first.wait_for(timeout=60_000)
    config = {"ops": {"warehouse_vacuum": {"config": {"retention": "8d", "dry_run": False}}}}
    _dismiss_welcome(page, wait_ms=15_000)  # the community dialog opens a few seconds late
    # the editor's own API, as typing would set it (Dagster's popovers cover it for clicks)
    page.locator(".CodeMirror").first.wait_for(timeout=30_000)
    page.evaluate(
        "text => document.querySelector('.CodeMirror').CodeMirror.setValue(text)",
        json.dumps(config, indent=2),  # YAML reads JSON
    )
    page.get_by_text('"8d"').first.wait_for(timeout=30_000)
    page.get_by_text("No errors").first.wait_for(timeout=30_000)
    page.screenshot(path=str(shots / "vacuum_launchpad_filled.png"), full_page=True)
    page.get_by_role("button", name="Launch Run").first.click()
    page.wait_for_url("**/runs/**", timeout=60_000)
    run_id = page.url.rstrip("/").split("/runs/")[-1].split("?")[0]
    deadline = time.monotonic() + 180
    status = None
    while time.monotonic() < deadline:
        data = _graphql(base, f'{{ runOrError(runId: "{run_id}") {{ ... on Run {{ status }} }} }}')
        status = data["data"]["runOrError"].get("status")
        if status in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(1)
    page.screenshot(path=str(shots / "vacuum_run.png"), full_page=True)
    assert status == "SUCCESS", status
    # the run's config carried the human duration: the plan's retention is 8 days in ms
    page.goto(f"{base}/assets/events?view=events", wait_until="networkidle")
    _dismiss_welcome(page)
    page.get_by_text("8 days").first.wait_for(timeout=60_000)
    page.screenshot(path=str(shots / "events_asset_history.png"), full_page=True)
    html = page.content()
    # the duration reads as one, with no raw milliseconds beside it
    assert "retention_ms" not in html and "691200000" not in html and "691,200,000" not in html
    for key in ("dagster/row_count", "table_version", "skipped"):
        assert key in html, f"{key} missing from the asset's events"
    # the checks tab says what each check guards and how to fix a failure
    page.goto(f"{base}/assets/events?view=checks", wait_until="networkidle")
    page.get_by_text("checkpoint_lag").first.wait_for(timeout=60_000)
    for name, description in CHECK_DESCRIPTIONS.items():
        page.get_by_text(name, exact=True).first.click()
        page.get_by_text(description).first.wait_for(timeout=15_000)
        if name == "tombstone_backlog":
            page.screenshot(path=str(shots / "asset_check_description.png"), full_page=True)


def test_the_demo_s_maintenance_shows_on_the_maintenance_asset_pages(
    dagster_ui, ui_dirs, page, tmp_path, monkeypatch
):
    """`make demo`'s maintenance, run into the server's instance on a table that has weeks of
    history (the demo's steps 2-3 on a table written without Spark): each action's asset page
    shows its materialization and what it did, and the table's history holds those runs."""
    import dagster as dg

    from tests.project.test_demo_maintenance import append_events, demo_script, history_rows

    base, _ = dagster_ui
    home, warehouse = ui_dirs
    shots = _shots_dir(tmp_path)
    monkeypatch.setenv("DELTA_OPS_WAREHOUSE", str(warehouse))
    monkeypatch.syspath_prepend(str(REPO))
    sys.modules.pop("definitions", None)
    import definitions

    script = demo_script()
    table = Path(definitions.EVENTS_TABLE)
    shutil.rmtree(table)  # the fixture's one-version table: the demo's four batches instead
    for batch in range(3):
        append_events(table, batch)
    script.let_time_pass(table)
    append_events(table, 3)
    history = warehouse / "_delta_ops_history"
    before = len(history_rows(history)) if history.exists() else 0
    # the control: before the run, the checkpoint's page says it never materialized, in the
    # words the assertions below look for
    page.goto(
        f"{base}/assets/delta_maintenance/warehouse/events/checkpoint", wait_until="networkidle"
    )
    _dismiss_welcome(page)
    page.get_by_text("Never materialized").first.wait_for(timeout=60_000)
    lines: list[str] = []
    history_key = dg.AssetKey(["delta_maintenance", "warehouse", "operation_history"])
    with dg.DagsterInstance.local_temp(str(home)) as instance:  # the server's instance
        results = script.run_maintenance(definitions.defs, instance, say=lines.append)
        shown = dg.materialize(
            [definitions.defs.resolve_assets_def(history_key)], instance=instance
        )
    sys.modules.pop("definitions", None)
    assert results, "\n".join(lines)
    assert shown.success
    deleted = {}
    for result in results:
        for event in result.get_asset_materialization_events():
            meta = event.step_materialization_data.materialization.metadata
            deleted[event.asset_key.path[-1]] = meta.get("num_deleted")
    assert set(deleted) == {"checkpoint", "cleanup", "vacuum"}, lines
    assert len(history_rows(history)) - before == len(deleted)
    for action in ("checkpoint", "cleanup", "vacuum"):
        page.goto(
            f"{base}/assets/delta_maintenance/warehouse/events/{action}", wait_until="networkidle"
        )
        _dismiss_welcome(page)
        page.get_by_text("table_version").first.wait_for(timeout=60_000)
        page.screenshot(path=str(shots / f"demo_{action}_asset.png"), full_page=True)
        html = page.content()
        assert "Never materialized" not in html, action
        if deleted[action] is not None:  # what cleanup and vacuum deleted, as the run said
            assert "num_deleted" in html, action
            assert f">{deleted[action].value}<" in html, (action, deleted[action].value)
    # the history's own asset: its counts, as the history table has them
    [event] = shown.get_asset_materialization_events()
    meta = event.step_materialization_data.materialization.metadata
    page.goto(
        f"{base}/assets/delta_maintenance/warehouse/operation_history", wait_until="networkidle"
    )
    _dismiss_welcome(page)
    page.get_by_text("runs_by_operation").first.wait_for(timeout=60_000)
    page.screenshot(path=str(shots / "demo_operation_history_asset.png"), full_page=True)
    html = page.content()
    assert "Never materialized" not in html
    for key in ("succeeded", "skipped", "failed"):
        assert key in html and f">{meta[key].value}<" in html, (key, meta[key].value)
    assert "Row count" in html and f">{meta['dagster/row_count'].value}<" in html
    for operation in ("checkpoint", "cleanup", "vacuum"):  # runs_by_operation's rows
        assert f">{operation}<" in html, operation
    assert meta["dagster/row_count"].value == len(history_rows(history))
