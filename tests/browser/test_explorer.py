#!/usr/bin/env python3
"""The backward explorer page in a real browser: Debian's chromium, headless, driven by chromedriver.

    test_explorer.py PAGE.html RECORD.json [SCREENSHOT.png] [--screenshot-op OP]
    test_explorer.py --check-only          (exit 0 when the browser can run, 77 when not)

PAGE is what autograd::write_backward_html wrote for a backward pass, RECORD the same pass as
BackwardRecord::to_json (autograd/backward_record.h). The record is the truth: the page must show what the
engine recorded. The checks:
  - the page loads with no console errors (SEVERE entries of the browser log), and makes none later;
  - #node-count and the execution order (#order-list) equal the record's nodes, in order;
  - stepping (#btn-next, #btn-prev, #btn-last, #btn-first, #step-input + #btn-jump) visits the nodes in that
    order: body[data-current-node], #step-label "step S / N" and #param-count "k / n" follow each step;
    #btn-play plays them in that order and a second click pauses;
  - clicking a node of the graph (g.node#n<ID>) opens #panel with the node's op and the statistics of every
    gradient it received, sent or (a leaf) accumulated, equal to the record's (data-value = String(number));
  - searching a parameter's name lists its leaf;
  - collapsing a module (#module-tree) hides exactly its nodes, and expanding shows them again;
  - the path from the loss (#btn-path) marks exactly the nodes its gradient reaches;
  - with SCREENSHOT: a 1600x1000 picture of the page, freshly loaded, at the middle step (or at the first
    node of --screenshot-op) with that node selected.

What the test relies on in the page (autograd/explorer/), and nothing else:
  #node-count (the number)   #step-label "step S / N" (S = 0 before the first step)   #param-count "k / n"
  #btn-first #btn-prev #btn-next #btn-last #btn-play   #step-input + #btn-jump
  <body data-current-step=S data-current-node=ID ("" at step 0) data-selected-node=ID>
  #order-list <li data-node-id data-step> in execution order   the graph's <g class="node" id="n<ID>">
  #panel with #panel-op #panel-scope #panel-source #panel-doc and, per gradient, .grad-summary[data-kind=in|
    out|leaf][data-index=i] holding [data-stat=norm|mean|min|max|max_abs|nan|inf] with data-value=String(x)
  #search (input) + #search-results li[data-node-id]   #btn-path, class on-path, #path-count
  window.explorer.record (set once the page is ready)

Without selenium (Debian: python3-selenium), chromium or chromedriver (chromium-driver) it prints
"SKIPPED: <why>" and exits 77, which CTest reports as Skipped. MINIDET_CHROMIUM and MINIDET_CHROMEDRIVER
override where the two are looked for.
"""
import argparse
import json
import math
import os
import pathlib
import shutil
import sys
import tempfile
import time
from collections import deque

SKIP = 77
CHROMIUM = os.environ.get("MINIDET_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MINIDET_CHROMEDRIVER", "/usr/bin/chromedriver")
WAIT_S = 10          # for the page to react to a click
LOAD_WAIT_S = 120    # for a large page (the detector's) to load and lay itself out on a slow machine
STEP_ALL_UP_TO = 60  # graphs up to this many nodes are stepped through node by node; larger ones in part
STEP_FIRST = 30      # larger graphs: the first 30 steps, then #btn-last
STATS = ("norm", "mean", "min", "max", "max_abs", "nan", "inf")  # data-stat = the record's key


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(SKIP)


def browser_missing():
    """Why the browser cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return f"selenium is not importable by {sys.executable} (Debian: apt-get install python3-selenium)"
    if not executable(CHROMIUM):
        return f"no chromium at {CHROMIUM} (Debian: apt-get install chromium)"
    if not executable(CHROMEDRIVER):
        return f"no chromedriver at {CHROMEDRIVER} (Debian: apt-get install chromium-driver)"
    return None


def executable(program):
    return shutil.which(program) is not None  # a path is checked as it is, a bare name on PATH


# ---------------------------------------------------------------------------------------------- the record
def summaries(node):
    """(kind, index, summary) of every gradient the panel must show for this node."""
    out = []
    for i, s in enumerate(node.get("grads_in") or []):
        if s is not None:
            out.append(("in", i, s))
    for i, s in enumerate(node.get("grads_out") or []):
        if s is not None:
            out.append(("out", i, s))
    if node.get("leaf_grad") is not None:
        out.append(("leaf", 0, node["leaf_grad"]))
    return out


def reachable(record, start):
    """Ids of the nodes the gradient of node `start` reaches along the edges, `start` included."""
    by_id = {n["id"]: n for n in record["nodes"]}
    seen = {start}
    queue = deque([start])
    while queue:
        for edge in by_id[queue.popleft()].get("edges") or []:
            to = edge.get("to", -1)
            if to != -1 and to in by_id and to not in seen:
                seen.add(to)
                queue.append(to)
    return seen


def same_number(page_text, expected, what):
    assert page_text is not None, f"{what}: the page has no data-value (the record says {expected!r})"
    try:
        got = float(page_text)
    except ValueError:
        raise AssertionError(f"{what}: data-value {page_text!r} is not a number (the record says {expected!r})")
    expected = float(expected)
    if math.isnan(expected):
        assert math.isnan(got), f"{what}: the page shows {page_text}, the record NaN"
        return
    assert math.isclose(got, expected, rel_tol=1e-12, abs_tol=1e-300), \
        f"{what}: the page shows {page_text}, the record {expected!r}"


# ------------------------------------------------------------------------------------------------ the test
class ExplorerTest:
    def __init__(self, driver, record):
        self.d = driver
        self.record = record
        self.nodes = record["nodes"]
        self.n = len(self.nodes)
        self.n_params = sum(1 for node in self.nodes if node["op"] == "AccumulateGrad")
        self.fallback_clicks = 0
        self.last_click_error = None

    # -- helpers
    def js(self, script, *args):
        return self.d.execute_script(script, *args)

    def text(self, selector):
        return self.js("const e = document.querySelector(arguments[0]);"
                       "return e ? e.textContent.replace(/\\s+/g, ' ').trim() : null;", selector)

    def find(self, selector):
        from selenium.webdriver.common.by import By
        found = self.d.find_elements(By.CSS_SELECTOR, selector)
        assert found, f"the page has no {selector}"
        return found[0]

    def real_click(self, selector):
        """Clicks like a user (scrolled into view, at the element's centre); False when it cannot take one,
        e.g. a node of a large graph that the view has panned away from."""
        from selenium.common.exceptions import (ElementClickInterceptedException,
                                                ElementNotInteractableException)
        element = self.find(selector)
        self.js("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", element)
        try:
            element.click()
            return True
        except (ElementClickInterceptedException, ElementNotInteractableException) as e:
            self.last_click_error = type(e).__name__
            return False

    def click(self, selector):
        """A real click where the element can take one; else a dispatched click event (counted)."""
        if not self.real_click(selector):
            self.fallback_clicks += 1
            print(f"note: {selector} could not take a real click ({self.last_click_error}); dispatching a click event")
            self.js("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true, view: window}))",
                    self.find(selector))

    def jump(self, s, why):
        box = self.find("#step-input")
        self.clear_input(box)
        box.send_keys(str(s))
        self.click("#btn-jump")
        self.expect_step(s, f"after #step-input {s} and #btn-jump ({why})")

    def clear_input(self, box):
        """Empties a text box the way a user does, so that the page sees input events."""
        from selenium.webdriver.common.keys import Keys
        box.send_keys(Keys.CONTROL, "a")
        box.send_keys(Keys.DELETE)

    def state(self):
        return self.js("""
            const b = document.body, t = s => { const e = document.querySelector(s);
              return e ? e.textContent.replace(/\\s+/g, ' ').trim() : null; };
            return {step: b.getAttribute('data-current-step'), node: b.getAttribute('data-current-node'),
                    selected: b.getAttribute('data-selected-node'), label: t('#step-label'),
                    params: t('#param-count')};""")

    def wait_for(self, condition, what, timeout=WAIT_S):
        """Polls condition() (True when done) and fails naming `what` and the page's state."""
        deadline = time.monotonic() + timeout
        while True:
            if condition():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} (after {timeout} s the page's state is {self.state()})")
            time.sleep(0.02)

    def console_errors(self, when):
        errors = [entry for entry in self.d.get_log("browser") if entry.get("level") == "SEVERE"]
        assert not errors, f"console errors {when}:\n" + "\n".join(e.get("message", str(e)) for e in errors)

    def expect_step(self, s, how):
        node = "" if s == 0 else str(self.nodes[s - 1]["id"])
        label = f"step {s} / {self.n}"
        params = f"{sum(1 for x in self.nodes[:s] if x['op'] == 'AccumulateGrad')} / {self.n_params}"

        def at_step():
            st = self.state()
            return st["step"] == str(s) and st["node"] == node
        self.wait_for(at_step, f"{how}: expected body[data-current-step]={s} and data-current-node={node!r}")
        st = self.state()
        assert st["label"] == label, f"{how}: #step-label reads {st['label']!r}, expected {label!r}"
        assert st["params"] == params, f"{how}: #param-count reads {st['params']!r}, expected {params!r}"

    # -- the checks
    def check_loaded(self, quiet=False):
        self.wait_for(lambda: self.js("return !!(window.explorer && window.explorer.record) && "
                                      "!!document.querySelector('#node-count') && "
                                      "document.querySelector('#node-count').textContent.trim() !== ''"),
                      "the page never set up window.explorer and #node-count", timeout=LOAD_WAIT_S)
        self.console_errors("while the page loaded")
        if not quiet:
            print("ok: the page loaded with no console errors")

    def check_count_and_order(self):
        count = self.text("#node-count")
        assert count == str(self.n), f"#node-count reads {count!r}, the record has {self.n} nodes"
        listed = self.js("return Array.from(document.querySelectorAll('#order-list li'))"
                         ".map(li => [li.getAttribute('data-node-id'), li.getAttribute('data-step')]);")
        ids = [x[0] for x in listed]
        expected = [str(node["id"]) for node in self.nodes]
        assert len(ids) == self.n, f"#order-list has {len(ids)} items, the record {self.n} nodes"
        for i, (got, want) in enumerate(zip(ids, expected)):
            assert got == want, f"#order-list item {i + 1} is node {got}, the engine ran node {want} at step {i + 1}"
        steps = [x[1] for x in listed]
        assert steps == [str(i + 1) for i in range(self.n)], f"#order-list data-step is not 1..{self.n}: {steps[:10]}..."
        svg_ids = set(self.js("return Array.from(document.querySelectorAll('svg g.node')).map(g => g.id);"))
        missing = [i for i in expected if f"n{i}" not in svg_ids]
        assert not missing, f"the graph has no g.node#n<ID> for nodes {missing[:10]} ({len(missing)} of {self.n})"
        print(f"ok: #node-count is {self.n}; #order-list and the graph's nodes are the engine's, in its order")

    def check_stepping(self):
        self.expect_step(0, "before any step")
        stepped = self.n if self.n <= STEP_ALL_UP_TO else STEP_FIRST
        for s in range(1, stepped + 1):
            self.click("#btn-next")
            self.expect_step(s, f"after #btn-next number {s}")
        if stepped < self.n:
            self.click("#btn-last")
            self.expect_step(self.n, "after #btn-last")
        assert self.state()["params"] == f"{self.n_params} / {self.n_params}", \
            f"#param-count should read {self.n_params} / {self.n_params} at the last step"
        self.click("#btn-prev")
        self.expect_step(self.n - 1, "after #btn-prev from the last step")
        self.click("#btn-prev")
        self.expect_step(max(self.n - 2, 0), "after a second #btn-prev")
        mid = max(1, self.n // 2)
        self.jump(mid, "the middle step")
        self.click("#btn-first")
        self.expect_step(0, "after #btn-first")
        self.console_errors("while stepping")
        how = "every step" if stepped == self.n else f"steps 1-{stepped}, then the last"
        print(f"ok: stepping visits the engine's order ({how}; prev, jump to {mid}, first); "
              f"#param-count 0 / {self.n_params} .. {self.n_params} / {self.n_params}")

    def check_play(self):
        """#btn-play steps on by itself, in the engine's order, until #btn-play again pauses it."""
        target = min(3, self.n)
        self.click("#btn-play")
        seen = []
        deadline = time.monotonic() + 30
        while True:
            st = self.state()
            if not seen or seen[-1] != (st["step"], st["node"]):
                seen.append((st["step"], st["node"]))
            if int(st["step"]) >= target or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.click("#btn-play")
        assert int(seen[-1][0]) >= target, f"#btn-play: after 30 s the page is still at step {seen[-1][0]}"
        for step, node in seen:
            s = int(step)
            want = "" if s == 0 else str(self.nodes[s - 1]["id"])
            assert node == want, f"#btn-play: at step {s} data-current-node is {node!r}, the engine ran {want!r}"
        steps = [int(x[0]) for x in seen]
        assert steps == sorted(steps), f"#btn-play went backwards: steps {steps}"
        paused = self.state()["step"]
        time.sleep(1.0)
        now = self.state()["step"]
        assert now == paused, f"a second #btn-play should pause, but the step went on from {paused} to {now}"
        self.click("#btn-first")
        self.expect_step(0, "after #btn-first")
        self.console_errors("while playing")
        print(f"ok: #btn-play plays the engine's order (seen steps {steps}) and a second click pauses at step {paused}")

    def select_by_click(self, node_id):
        """Clicks the node in the graph. A node out of view is brought there as a reader would: by jumping
        to its step (the view follows the running node), then clicked."""
        selector = f"svg g.node#n{node_id}"
        if not self.real_click(selector):
            self.jump(next(x["step"] for x in self.nodes if x["id"] == node_id), f"to bring node {node_id} into view")
            self.click(selector)
        self.wait_for(lambda: self.state()["selected"] == str(node_id),
                      f"clicking g.node#n{node_id} should select node {node_id} (body[data-selected-node])")

    def check_panel(self, node):
        nid = node["id"]
        self.select_by_click(nid)
        panel = self.find("#panel")
        assert panel.is_displayed(), f"#panel is not shown after clicking node {nid}"
        op = self.text("#panel-op")
        assert op == node["op"], f"node {nid}: #panel-op reads {op!r}, the record says {node['op']!r}"
        for key, selector in (("scope", "#panel-scope"), ("source", "#panel-source")):
            if node.get(key):
                shown = self.text(selector)
                assert shown is not None and node[key] in shown, \
                    f"node {nid}: {selector} reads {shown!r}, which does not name the record's {key} {node[key]!r}"
        shown = self.js("""
            return Array.from(document.querySelectorAll('#panel .grad-summary')).map(e => ({
              kind: e.getAttribute('data-kind'), index: e.getAttribute('data-index'),
              stats: Object.fromEntries(Array.from(e.querySelectorAll('[data-stat]')).map(
                s => [s.getAttribute('data-stat'), s.getAttribute('data-value')]))}));""")
        expected = summaries(node)
        assert expected, f"node {nid} has no gradient summary in the record: pick another node"
        for kind, index, summary in expected:
            match = [x for x in shown if x["kind"] == kind and (kind == "leaf" or x["index"] == str(index))]
            assert match, (f"node {nid} ({node['op']}): #panel has no .grad-summary[data-kind={kind}]"
                           f"[data-index={index}] (it has {[(x['kind'], x['index']) for x in shown]})")
            for stat in STATS:
                same_number(match[0]["stats"].get(stat), summary[stat],
                            f"node {nid} ({node['op']}) {kind}[{index}] {stat}")
        self.console_errors(f"after clicking node {nid}")
        return len(expected)

    def check_panels(self):
        def has_values(node):
            return any("values" in s for _, _, s in summaries(node))

        def has_heat_map(node):
            return any("heat_map" in s and "values" not in s for _, _, s in summaries(node))
        picks = []
        for why, test in (("the loss", lambda x: x is self.nodes[0]),
                          ("a node with values", lambda x: x["op"] != "AccumulateGrad" and has_values(x)),
                          ("a node with a heat map only", has_heat_map),
                          ("a leaf", lambda x: x["op"] == "AccumulateGrad" and x.get("leaf_grad") is not None),
                          ("an input that needs no gradient", lambda x: any(e.get("to", -1) == -1 for e in x["edges"])),
                          ("RoIAlign", lambda x: x["op"] == "roi_align"),
                          ("the deformable convolution", lambda x: x["op"] == "deform_conv2d"),
                          ("the last node", lambda x: x is self.nodes[-1])):
            node = next((x for x in self.nodes if test(x) and summaries(x)), None)
            if node is None:
                assert why not in ("a node with values", "a leaf"), f"the record has no {why} to click"
                continue
            if all(node is not p for _, p in picks):
                picks.append((why, node))
        done = []
        for why, node in picks:
            k = self.check_panel(node)
            done.append(f"{node['id']} {node['op']} ({why}, {k} summaries)")
        print("ok: clicked nodes show the record's op and statistics: " + "; ".join(done))

    def check_search(self):
        leaves = [x for x in self.nodes if x["op"] == "AccumulateGrad" and x.get("leaf")]
        assert leaves, "the record has no named parameter (AccumulateGrad with a leaf name) to search for"
        names = []
        for leaf in (leaves[0], leaves[-1]) if len(leaves) > 1 else (leaves[0],):
            box = self.find("#search")
            self.clear_input(box)
            box.send_keys(leaf["leaf"])
            sel = f"#search-results li[data-node-id='{leaf['id']}']"
            self.wait_for(lambda: self.js("return !!document.querySelector(arguments[0])", sel),
                          f"searching {leaf['leaf']!r} should list its leaf node {leaf['id']} ({sel})")
            names.append(f"{leaf['leaf']} -> node {leaf['id']}")
        self.clear_input(box)
        self.console_errors("while searching")
        print("ok: search finds " + "; ".join(names))

    def check_modules(self):
        """Clicking a module in #module-tree collapses its cluster: its nodes hide, the others stay; a second
        click shows them again. A node belongs to its scope's cluster; a leaf to its parameter's module."""
        def cluster_of(node):
            if node["op"] == "AccumulateGrad" and node.get("leaf"):
                return node["leaf"].rsplit(".", 1)[0] if "." in node["leaf"] else ""
            return node["scope"]
        tops = {}
        for node in self.nodes:
            top = cluster_of(node).split(".")[0]
            if top:
                tops.setdefault(top, []).append(node["id"])
        if not tops:
            print("ok: no module scopes in this record, nothing to collapse")
            return
        scope, inside = max(tops.items(), key=lambda item: len(item[1]))
        outside = [n["id"] for n in self.nodes if n["id"] not in set(inside)]
        hidden = "return document.getElementById('n' + arguments[0]).style.display === 'none'"
        toggle = ("document.querySelector(\"#module-tree li[data-scope='\" + arguments[0] + \"'] > span\").click()")
        self.js(toggle, scope)
        self.wait_for(lambda: all(self.js(hidden, i) for i in inside),
                      f"collapsing module {scope!r} should hide its {len(inside)} nodes")
        assert not any(self.js(hidden, i) for i in outside), f"collapsing {scope!r} hid a node outside it"
        self.js(toggle, scope)
        self.wait_for(lambda: not any(self.js(hidden, i) for i in inside),
                      f"expanding module {scope!r} again should show its nodes")
        self.console_errors("while collapsing modules")
        print(f"ok: module {scope!r} collapses ({len(inside)} nodes hidden, {len(outside)} shown) and expands")

    def path_from(self, node):
        want = reachable(self.record, node["id"])
        self.select_by_click(node["id"])
        self.click("#btn-path")
        self.wait_for(lambda: self.text("#path-count") == str(len(want)),
                      f"#path-count should read {len(want)} (the nodes node {node['id']}'s gradient reaches, "
                      f"itself included) but reads {self.text('#path-count')!r}")
        marked = set(self.js("return Array.from(document.querySelectorAll('svg g.node.on-path')).map(g => g.id);"))
        expected = {f"n{i}" for i in want}
        assert marked == expected, (f"path from node {node['id']}: g.node.on-path marks {len(marked)} nodes, "
                                    f"expected {len(expected)}; missing {sorted(expected - marked)[:10]}, "
                                    f"extra {sorted(marked - expected)[:10]}")
        self.console_errors("after #btn-path")
        return len(want)

    def check_path(self):
        """From the loss (the whole graph, usually), then from a node whose gradient reaches only part of it
        (RoIAlign's in the detector: the backbone below it)."""
        root = self.nodes[0]
        done = [f"the loss (node {root['id']}): {self.path_from(root)} nodes"]
        sizes = {x["id"]: len(reachable(self.record, x["id"])) for x in self.nodes if x["op"] != "AccumulateGrad"}
        part = [x for x in self.nodes if 1 < sizes.get(x["id"], 0) < self.n]
        if part:
            node = next((x for x in part if x["op"] == "roi_align"), None) or \
                min(part, key=lambda x: abs(sizes[x["id"]] - self.n / 2))
            done.append(f"{node['op']} (node {node['id']}): {self.path_from(node)} nodes")
        print("ok: #btn-path marks the nodes a gradient reaches, from " + "; from ".join(done))

    def screenshot(self, url, path, op=None):
        """The page as a reader first sees it, fresh, at the step of node `op`'s first node (or the middle
        step) with that node selected."""
        self.d.get(url)
        self.check_loaded(quiet=True)
        node = next((x for x in self.nodes if x["op"] == op), None) if op else None
        if op and node is None:
            print(f"note: no {op} node in the record; the screenshot shows the middle step")
        s = node["step"] if node else max(1, self.n // 2)
        self.jump(s, "for the screenshot")
        self.select_by_click(self.nodes[s - 1]["id"])
        time.sleep(0.5)  # let transitions finish
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        assert self.d.save_screenshot(path), f"could not save the screenshot to {path}"
        self.console_errors("while taking the screenshot")
        print(f"ok: screenshot ({self.js('return [window.innerWidth, window.innerHeight]')}) of step {s} / "
              f"{self.n} with node {self.nodes[s - 1]['id']} ({self.nodes[s - 1]['op']}) selected: {path}")


def make_driver(profile):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1600,1000", "--hide-scrollbars", "--no-first-run",
                "--disable-extensions", f"--user-data-dir={profile}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    # The window's size includes what little chrome headless chromium keeps: size it so the page gets 1600x1000.
    driver.set_window_size(1600, 1000)
    inner = driver.execute_script("return [window.innerWidth, window.innerHeight];")
    if inner != [1600, 1000]:
        driver.set_window_size(1600 + 1600 - inner[0], 1000 + 1000 - inner[1])
    driver.set_page_load_timeout(LOAD_WAIT_S)
    return driver


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("page", nargs="?", help="the page (autograd::write_backward_html)")
    parser.add_argument("record", nargs="?", help="its record (BackwardRecord::to_json)")
    parser.add_argument("screenshot", nargs="?", help="where to save a screenshot (PNG), optional")
    parser.add_argument("--screenshot-op", metavar="OP", default=os.environ.get("MINIDET_SCREENSHOT_OP"),
                        help="the screenshot shows the first node of this op (roi_align, say), selected, "
                             "at its step; by default $MINIDET_SCREENSHOT_OP, else the middle step's node")
    parser.add_argument("--check-only", action="store_true", help="only say whether the browser can run")
    args = parser.parse_args()
    why = browser_missing()
    if why:
        skip(why)
    if args.check_only:
        print("test_explorer: selenium, chromium and chromedriver are present")
        return 0
    if not args.page or not args.record:
        parser.error("PAGE and RECORD are required")
    with open(args.record, encoding="utf-8") as f:
        record = json.load(f)
    assert record.get("format") == "minidet-backward-record", f"{args.record} is not a backward record"
    assert record["nodes"], f"{args.record} holds no nodes"
    size = os.path.getsize(args.page)
    print(f"test_explorer: {args.page} ({size / 1e6:.2f} MB), {len(record['nodes'])} nodes, "
          f"{sum(1 for n in record['nodes'] if n['op'] == 'AccumulateGrad')} parameters")

    with tempfile.TemporaryDirectory(prefix="minidet-chromium-") as profile:
        from selenium.common.exceptions import WebDriverException
        try:
            driver = make_driver(profile)
        except WebDriverException as e:
            print(f"FAILED: chromium ({CHROMIUM}) did not start under chromedriver ({CHROMEDRIVER}): {e.msg}")
            return 1
        try:
            test = ExplorerTest(driver, record)
            start = time.monotonic()
            url = pathlib.Path(args.page).resolve().as_uri()
            driver.get(url)
            test.check_loaded()
            print(f"    (loaded in {time.monotonic() - start:.1f} s)")
            test.check_count_and_order()
            test.check_stepping()
            test.check_play()
            test.check_panels()
            test.check_search()
            test.check_modules()
            test.check_path()
            if args.screenshot:
                test.screenshot(url, args.screenshot, args.screenshot_op)
            test.console_errors("at the end")
            if test.fallback_clicks:
                print(f"note: {test.fallback_clicks} clicks were dispatched events, not real clicks")
        except (AssertionError, WebDriverException) as e:
            print(f"FAILED: {e if isinstance(e, AssertionError) else type(e).__name__ + ': ' + str(e.msg)}")
            if args.screenshot:
                failed = os.path.splitext(args.screenshot)[0] + ".failed.png"
                try:
                    driver.save_screenshot(failed)
                    print(f"    (the page as it was: {failed})")
                except Exception:  # noqa: BLE001 - the failure above is what matters
                    pass
            return 1
        finally:
            driver.quit()
    print("test_explorer: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
