"""The HTML report's model-comparison table in a real headless Chromium: it renders without script errors,
a click on a column heading sorts the rows by that column (numbers by value, both directions), and a
hostile test name stays text."""

from __future__ import annotations

import re
from pathlib import Path

from test_viewer_browser import browser, load  # noqa: F401  (the module-scoped fixture)

from pytest_agentreplay.report import build_report, render_report
from pytest_agentreplay.report.comparison_table import Comparison, table_rows
from pytest_agentreplay.report.status import Status, TestStatus

AGREEMENTS = {"test_b": 0.3, "test_a": 1.0, "test_<img src=x onerror=alert(1)>": 0.05, "test_c": 0.6}

# Clicks the agreement heading (column 4) `clicks` times, then writes the rows' order on <html>.
CLICK = """<script>
(function () {
  var th = document.querySelectorAll('table.comparison th')[4];
  for (var i = 0; i < CLICKS; i++) { th.click(); }
  var order = Array.prototype.map.call(
    document.querySelectorAll('table.comparison tbody tr'),
    function (tr) { return tr.cells[4].textContent; });
  document.documentElement.setAttribute('data-order', order.join(','));
})();
</script></body>"""


def _page(tmp_path: Path, clicks: int) -> Path:
    comparisons = [
        {
            "test": f"tests/test_agent.py::{name}",
            "recorded_model": "gpt-4o-mini",
            "live_model": "gpt-4.1-mini",
            "runs": 20,
            "agreement": rate,
            "interval": [max(rate - 0.2, 0.0), min(rate + 0.2, 1.0)],
            "paths": [{"path": "lookup_order(order_id='A1')", "runs": 20, "recorded": True}],
            "verdict": "pass" if rate >= 0.9 else "fail",
        }
        for name, rate in AGREEMENTS.items()
    ]
    statuses = [TestStatus(c["test"], "c.json", Status.REPLAYED, "model-comparison") for c in comparisons]
    html = render_report(".html", build_report(statuses, comparison=Comparison(table_rows(comparisons))))
    assert html.count("</body>") == 1
    file = tmp_path / f"report-{clicks}.html"
    file.write_text(html.replace("</body>", CLICK.replace("CLICKS", str(clicks))), encoding="utf-8")
    return file


def _order(dom: str) -> list[str]:
    found = re.search(r'<html[^>]*data-order="([^"]*)"', dom)
    assert found is not None, "the click script did not run"
    return found.group(1).split(",")


def test_the_comparison_table_sorts_by_a_clicked_column(browser: str, tmp_path: Path) -> None:  # noqa: F811
    unsorted = _order(load(browser, tmp_path, _page(tmp_path, 0)))
    assert unsorted == ["30%", "100%", "5%", "60%"]
    ascending = _order(load(browser, tmp_path, _page(tmp_path, 1)))
    assert ascending == ["5%", "30%", "60%", "100%"]
    dom = load(browser, tmp_path, _page(tmp_path, 2))
    assert _order(dom) == ["100%", "60%", "30%", "5%"]
    assert "<img" not in dom and "test_&lt;img src=x onerror=alert(1)&gt;" in dom
