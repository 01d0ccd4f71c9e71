"""Time a node click in the console's graph view with marks recorded inside the page, so the
numbers do not depend on how the driver waits (a driver that waits for the page can measure
its own waiting).

    python -m tests.browser.synthetic_graph /tmp/gc/home synthetic
    TACIT_HOME=/tmp/gc/home TACIT_CONSOLE__ADMIN_TOKEN=tok tacit serve --port 18788 &
    python bench/bench_graph_click.py http://127.0.0.1:18788 --token tok --mode mouse-sleep
    xvfb-run python bench/bench_graph_click.py ... --headed          # a headed chromium

Modes, each right after the hub's first drawing (201 nodes), on `node 0002`:
  mouse-sleep     a real mouse click at the node's drawn position, then sleep, then read marks
  emit-sleep      `emit('tap')` from an evaluate that returns emit's value (the element)
  emit-wait       the same, then a separate wait_for_function (the harness that saw 25–48 s)
  emit-void-wait  `emit('tap'); null` (nothing returned), then wait_for_function
Marks are performance.now() in ms from cytoscape's tap handler: the fetch's start and
resolution, the JSON, the nodes added, data-loaded (two frames after the layout), pointer events
and long tasks; `tapstart` names what cytoscape hit (a miss shows another element).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench import results as results_md

INSTRUMENT = r"""
(() => {
  const marks = window.__marks = [];
  const mark = (what) => marks.push({what, t: performance.now()});
  window.__mark = mark;
  // The page's event loop: the largest gap between 50 ms timers and between frames.
  const beat = window.__beat = {maxTimerGap: 0, lastTimer: performance.now(), frames: 0,
    maxFrameGap: 0, lastFrame: 0};
  setInterval(() => { const n = performance.now();
    beat.maxTimerGap = Math.max(beat.maxTimerGap, n - beat.lastTimer); beat.lastTimer = n; }, 50);
  const tick = (ts) => {
    if (beat.lastFrame) beat.maxFrameGap = Math.max(beat.maxFrameGap, ts - beat.lastFrame);
    beat.lastFrame = ts; beat.frames += 1; requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  ['pointerdown', 'pointerup', 'click'].forEach(type =>
    document.addEventListener(type, () => mark(type), true));
  try { new PerformanceObserver(l => l.getEntries().forEach(e =>
    marks.push({what: `longtask ${Math.round(e.duration)} ms`, t: e.startTime})))
    .observe({type: 'longtask'}); } catch (e) {}
  const realFetch = window.fetch;
  window.fetch = function (url, opts) {
    mark('fetch start');
    return realFetch.call(this, url, opts).then(r => { mark('fetch resolved'); return r; });
  };
  const realJson = Response.prototype.json;
  Response.prototype.json = function () {
    return realJson.call(this).then(d => { mark('json'); return d; });
  };
  let cy;
  Object.defineProperty(window, 'tacitGraph', {configurable: true, get: () => cy, set: (v) => {
    cy = v;
    cy.on('tapstart', (e) => mark('tapstart ' + (e.target === cy ? 'background' : e.target.id())));
    cy.on('tap', 'node', () => mark('tap handler'));
    cy.on('add', 'node', () => {
      if (!window.__added) { window.__added = true; mark('nodes added'); } });
  }});
  document.addEventListener('DOMContentLoaded', () => {
    const el = document.getElementById('cy');
    if (el) new MutationObserver(() => mark('data-loaded ' + el.dataset.loaded))
      .observe(el, {attributes: true, attributeFilter: ['data-loaded']});
  });
})();
"""
NODE = "node 0002"
RESET = """() => { window.__added = false; window.__marks.length = 0; const b = window.__beat;
  b.maxTimerGap = 0; b.maxFrameGap = 0; b.frames = 0; b.lastTimer = performance.now(); }"""
EXPANDED = "() => document.getElementById('cy').dataset.loaded == '203'"


def click_once(page: Any, url: str, token: str, mode: str, sleep: float) -> dict[str, Any]:
    page.goto(f"{url}/console/")
    page.fill("#token", token)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(f"{url}/console/")
    page.goto(f"{url}/console/graph?kb=synthetic&entity=hub")
    # A function, not a string: polling a string evaluates it, which the console's CSP refuses.
    page.wait_for_function("() => document.getElementById('cy').dataset.loaded == '201'")
    page.evaluate(RESET)
    x, y = page.evaluate(
        f"""() => {{ const p = window.tacitGraph.getElementById('{NODE}').renderedPosition();
        const r = document.getElementById('cy').getBoundingClientRect();
        return [r.left + p.x, r.top + p.y]; }}"""
    )
    tap = f"window.__mark('issued'); window.tacitGraph.getElementById('{NODE}').emit('tap')"
    started = time.monotonic()
    if mode == "mouse-sleep":
        page.mouse.click(x, y)
        time.sleep(sleep)
    elif mode == "emit-sleep":
        page.evaluate(tap)
        time.sleep(sleep)
    elif mode == "emit-wait":
        page.evaluate(tap)
        page.wait_for_function(EXPANDED, timeout=120_000)
    else:  # emit-void-wait
        page.evaluate(tap + "; null")
        page.wait_for_function(EXPANDED, timeout=120_000)
    driver_ms = (time.monotonic() - started) * 1000
    marks = sorted(page.evaluate("window.__marks"), key=lambda m: m["t"])
    beat = page.evaluate("window.__beat")
    base = next((m["t"] for m in marks if m["what"] == "tap handler"), marks[0]["t"])
    return {
        "driver_ms": round(driver_ms),
        "max_timer_gap_ms": round(beat["maxTimerGap"]),
        "max_frame_gap_ms": round(beat["maxFrameGap"]),
        "marks": {m["what"]: round(m["t"] - base) for m in marks},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="a `tacit serve` whose data home has the `synthetic` KB")
    parser.add_argument("--token", required=True, help="the console's admin token")
    parser.add_argument(
        "--mode", choices=("mouse-sleep", "emit-sleep", "emit-wait", "emit-void-wait")
    )
    parser.add_argument("--headed", action="store_true", help="a headed chromium (needs $DISPLAY)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=5.0, help="seconds the *-sleep modes wait")
    results_md.add_arguments(parser)
    args = parser.parse_args()
    run_md = results_md.Run.start(__file__, enabled=not args.no_results)
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=not args.headed, args=["--no-sandbox"]
        )
        try:
            clicks = []
            for _ in range(args.runs):
                context = browser.new_context(viewport={"width": 1360, "height": 900})
                context.add_init_script(INSTRUMENT)
                found = click_once(context.new_page(), args.url, args.token, args.mode, args.sleep)
                print(json.dumps({"mode": args.mode, "headed": args.headed, **found}))
                clicks.append(found)
                context.close()
        finally:
            browser.close()
    run_md.write(headline(clicks, args.mode, args.headed))


def headline(clicks: list[dict[str, Any]], mode: str, headed: bool) -> list[results_md.Row]:
    """The median over the runs of the page's own time from the tap to the expanded graph
    drawn, and of the driver's wall time around it."""
    label = f"node click ({mode}{', headed' if headed else ''})"
    # the mark names the node count it loaded: "data-loaded 203"
    loaded = [
        next(t for mark, t in c["marks"].items() if mark.startswith("data-loaded"))
        for c in clicks
        if any(mark.startswith("data-loaded") for mark in c["marks"])
    ]
    out = [
        results_md.Row(
            f"{label}: driver wall time, median",
            statistics.median(c["driver_ms"] for c in clicks),
            unit="ms",
            notes=f"{len(clicks)} runs",
        )
    ]
    if loaded:
        out.append(
            results_md.Row(
                f"{label}: tap to data-loaded in the page, median",
                statistics.median(loaded),
                unit="ms",
                notes=f"{len(loaded)} of {len(clicks)} runs",
            )
        )
    return out


if __name__ == "__main__":
    main()
