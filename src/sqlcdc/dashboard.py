"""The local data-quality dashboard: one self-contained HTML page from a warehouse's ``dq_metrics``.

No network, no external scripts: the metrics and samples are embedded as JSON and drawn by an
inline script into SVG charts and tables. Sections:

- **Runs and balance** (first): each ``sqlcdc run`` of the run log (:mod:`sqlcdc.run_log`), latest
  first, with each source's balance after it: landed = silver + quarantine + dropped + skipped
  (+ duplicate + pending), ok or MISMATCH;
- **Latest run per table**: the latest run's rows checked / failed / dropped / quarantined per rule;
- **Failures over time**: one chart per table, one line per rule (failed rows per run) on a time
  axis, with a point only for the runs the rule has rows in;
- **Freshness**: per table, newest source commit seen, its age when measured, and each run's lag;
- **Samples**: the latest quarantined and dropped records with reason, rules and lineage.

Example::

    from sqlcdc import dashboard
    html = dashboard.render(dashboard.collect(spark, Path("warehouse")))
    Path("dq.html").write_text(html)
"""

from __future__ import annotations

import datetime as dt
import html
import json
from pathlib import Path
from typing import Any

from sqlcdc import dq_metrics, run_log


def _plain(value: Any) -> Any:
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _tables(warehouse: Path, prefix: str) -> list[Path]:
    root = warehouse / "tables"
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.name.startswith(prefix) and (p / "_delta_log").is_dir())


def collect(spark, warehouse: Path, *, samples: int = 25) -> dict[str, Any]:
    """The dashboard's data: metric rows and the latest quarantine/dropped samples of ``warehouse``."""
    from pyspark.sql import functions as F

    warehouse = Path(warehouse)
    path = warehouse / "tables" / dq_metrics.TABLE
    metrics: list[dict[str, Any]] = []
    if (path / "_delta_log").is_dir():
        df = spark.read.format("delta").load(str(path)).orderBy("run_time", "table_name", "rule")
        # times as text in the session's time zone (UTC in sqlcdc's sessions), not Python's local one
        df = df.select(*[F.date_format(c, "yyyy-MM-dd HH:mm:ss.SSSSSS").alias(c)
                         if c in ("run_time", "latest_commit_time", "measured_at") else F.col(c) for c in df.columns])
        metrics = [{k: _plain(v) for k, v in r.asDict().items()} for r in df.collect()]
    rows: list[dict[str, Any]] = []
    for kind, prefix in (("quarantine", "quarantine_"), ("dropped", "dropped_")):
        for table in _tables(warehouse, prefix):
            df = spark.read.format("delta").load(str(table))
            for r in df.orderBy(F.col("bronze_ingest_time").desc(), "bronze_record_id").limit(samples).collect():
                d = {k: _plain(v) for k, v in r.asDict().items()}
                d["raw"] = (d.get("raw") or "")[:400]
                d["kind"], d["table"] = kind, table.name
                rows.append(d)
    rows.sort(key=lambda d: (d.get("bronze_ingest_time") or "", d["table"]), reverse=True)
    return {
        "generated_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(sep=" "),
        "warehouse": str(warehouse),
        "metrics": metrics,
        "samples": rows[: samples * 2],
        "runs": run_log.runs(run_log.path(warehouse)),
    }


_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#1b1f24;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #d0d7de}
.meta{color:#57606a;font-size:12px}
table{border-collapse:collapse;margin:6px 0 12px;background:#fff}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f6}td.n{text-align:right;font-variant-numeric:tabular-nums}
td.bad{color:#b42318;font-weight:600}.ok{color:#1a7f37}
.chart{display:inline-block;margin:0 18px 18px 0;background:#fff;border:1px solid #d0d7de;padding:6px}
.legend span{display:inline-block;margin-right:12px;font-size:12px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
code,.raw{font:12px ui-monospace,monospace;white-space:pre-wrap;word-break:break-all}
.empty{color:#57606a;font-style:italic}
"""

_JS = r"""
(function () {
  var data = JSON.parse(document.getElementById('dq-data').textContent);
  var M = data.metrics, S = data.samples, SVG = 'http://www.w3.org/2000/svg';
  var COLORS = ['#d1242f', '#0969da', '#8250df', '#bf8700', '#1a7f37', '#cf222e', '#57606a', '#e16f24'];
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    for (var k in (attrs || {})) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    for (var k in (attrs || {})) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function uniq(a) { var s = {}, o = []; a.forEach(function (x) { if (!(x in s)) { s[x] = 1; o.push(x); } }); return o; }
  function dur(sec) {
    if (sec === null || sec === undefined) return '';
    var a = Math.abs(sec), u = [['d', 86400], ['h', 3600], ['min', 60], ['s', 1]];
    for (var i = 0; i < u.length; i++) if (a >= u[i][1] || i === u.length - 1) return (sec / u[i][1]).toFixed(1) + ' ' + u[i][0];
  }
  function table(parent, head, rows, id) {
    if (!rows.length) { parent.appendChild(el('p', {'class': 'empty'}, 'none')); return; }
    var t = el('table', id ? {id: id} : {}), tr = el('tr');
    head.forEach(function (h) { tr.appendChild(el('th', {}, h)); });
    t.appendChild(tr);
    rows.forEach(function (r) {
      var row = el('tr');
      r.forEach(function (c) { row.appendChild(c instanceof Node ? c : el('td', {}, c)); });
      t.appendChild(row);
    });
    parent.appendChild(t);
  }
  function num(v, field, rule, tableName, bad) {
    return el('td', {'class': 'n' + (bad && v > 0 ? ' bad' : ''), 'data-field': field, 'data-rule': rule,
                     'data-table': tableName}, v);
  }
  var tables = uniq(M.map(function (m) { return m.table_name; })).sort();
  var runs = uniq(M.map(function (m) { return m.run_time; })).sort();
  // a run_time ('2026-11-24 18:30:00.123456', UTC) as milliseconds
  function ms(s) { return Date.parse(String(s).slice(0, 19).replace(' ', 'T') + 'Z'); }

  // Runs and balance: every sqlcdc run of the run log, latest first, each source's balance after it
  var balance = document.getElementById('balance'), RUNS = (data.runs || []).slice().reverse();
  var BAL = ['landed', 'in_silver', 'quarantined', 'dropped', 'skipped', 'duplicate', 'pending'];
  table(balance, ['run', 'exit', 'source', 'landed', '= silver', '+ quarantine', '+ dropped', '+ skipped',
                  '+ duplicate', '+ pending', 'balance'],
    [].concat.apply([], RUNS.map(function (r) {
      var when = String(r.run).slice(0, 19).replace('T', ' '), code = r.exit === undefined ? 'running or killed' : r.exit;
      if (!(r.balances || []).length) return [[when, code, el('td', {'class': 'empty', colspan: 9}, 'not counted (--no-summary, or the run did not finish)')]];
      return r.balances.map(function (b) {
        return [when, code, b.source].concat(BAL.map(function (f) {
          return el('td', {'class': 'n', 'data-source': b.source, 'data-run': r.run, 'data-field': f}, b[f] || 0);
        })).concat([el('td', {'class': b.ok ? 'ok' : 'bad', 'data-source': b.source, 'data-run': r.run, 'data-field': 'balance'},
                       b.ok ? 'ok' : 'MISMATCH')]);
      });
    })), 'balance-table');
  if (!RUNS.length) balance.appendChild(el('p', {'class': 'empty'}, 'No run log (warehouse/_sqlcdc/runs.jsonl): `sqlcdc run` writes it.'));

  // Runs: the latest run of each table, per rule
  var latest = document.getElementById('latest');
  tables.forEach(function (t) {
    var rows = M.filter(function (m) { return m.table_name === t; });
    var last = rows.map(function (m) { return m.run_time; }).sort().pop();
    latest.appendChild(el('h3', {}, (t === '*' ? 'source-level rules (envelopes, routing)' : 'table ' + t) + ' — run ' + last));
    table(latest, ['rule', 'kind', 'action', 'checked', 'passed', 'failed', 'warned', 'dropped', 'quarantined'],
      rows.filter(function (m) { return m.run_time === last; }).map(function (m) {
        return [el('td', {'class': 'rule'}, m.rule), m.rule_kind, m.action,
          num(m.rows_checked, 'rows_checked', m.rule, t), num(m.rows_passed, 'rows_passed', m.rule, t),
          num(m.rows_failed, 'rows_failed', m.rule, t, true), num(m.rows_warned, 'rows_warned', m.rule, t, true),
          num(m.rows_dropped, 'rows_dropped', m.rule, t, true), num(m.rows_quarantined, 'rows_quarantined', m.rule, t, true)];
      }), 'latest-' + t);
  });
  if (!tables.length) latest.appendChild(el('p', {'class': 'empty'}, 'No dq_metrics rows yet: run the pipeline first.'));

  // Failures over time: one chart per table, one line per rule with failures in any run
  var charts = document.getElementById('charts');
  tables.forEach(function (t) {
    var rows = M.filter(function (m) { return m.table_name === t; });
    var rules = uniq(rows.filter(function (m) { return m.rows_failed > 0; }).map(function (m) { return m.rule; })).sort();
    if (!rules.length) return;
    var W = 520, H = 220, L = 44, R = 24, T = 12, B = 42;
    var max = Math.max.apply(null, rows.map(function (m) { return m.rows_failed; }).concat([1]));
    // a time axis: a run sits at its time, the first and last run of any table at the ends
    var t0 = ms(runs[0]), t1 = ms(runs[runs.length - 1]);
    var x = function (run) { return L + (t1 === t0 ? (W - L - R) / 2 : (ms(run) - t0) * (W - L - R) / (t1 - t0)); };
    var y = function (v) { return T + (H - T - B) * (1 - v / max); };
    var box = el('div', {'class': 'chart', 'data-table': t});
    box.appendChild(el('div', {}, t === '*' ? 'source-level rules' : 'table ' + t));
    var svg = sv('svg', {width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'data-table': t});
    svg.appendChild(sv('line', {x1: L, y1: y(0), x2: W - R, y2: y(0), stroke: '#8c959f'}));
    svg.appendChild(sv('line', {x1: L, y1: T, x2: L, y2: y(0), stroke: '#8c959f'}));
    [0, max].forEach(function (v) { svg.appendChild(sv('text', {x: L - 6, y: y(v) + 4, 'text-anchor': 'end', 'font-size': 11}, v)); });
    uniq([runs[0], runs[runs.length - 1]]).forEach(function (r) {  // the axis' ends, as UTC time
      svg.appendChild(sv('text', {x: x(r), y: H - B + 16, 'text-anchor': 'middle', 'font-size': 10,
                                  'data-axis': 'time'}, String(r).slice(5, 16) + ' UTC'));
    });
    var legend = el('div', {'class': 'legend'});
    rules.forEach(function (rule, k) {
      var color = COLORS[k % COLORS.length], pts = [];
      rows.filter(function (m) { return m.rule === rule; }).sort(function (a, b) { return ms(a.run_time) - ms(b.run_time); })
        .forEach(function (m) {  // only the runs this rule has rows in: no invented zeros
          var v = m.rows_failed, r = m.run_time;
          pts.push(x(r) + ',' + y(v));
          var c = sv('circle', {cx: x(r), cy: y(v), r: 4, fill: color, 'data-rule': rule, 'data-run': r, 'data-failed': v});
          c.appendChild(sv('title', {}, rule + ' @ ' + r + ': ' + v + ' failed'));
          svg.appendChild(c);
        });
      svg.insertBefore(sv('polyline', {points: pts.join(' '), fill: 'none', stroke: color, 'stroke-width': 2,
                                       'data-rule': rule}), svg.firstChild);
      var item = el('span', {'data-rule': rule}); var sw = el('i'); sw.style.background = color;
      item.appendChild(sw); item.appendChild(document.createTextNode(rule)); legend.appendChild(item);
    });
    box.appendChild(svg); box.appendChild(legend); charts.appendChild(box);
  });
  if (!charts.children.length) charts.appendChild(el('p', {'class': 'empty ok'}, 'No rule failed in any run.'));

  // Freshness and lag
  var fresh = document.getElementById('freshness');
  table(fresh, ['table', 'run', 'newest commit in run', 'lag (run - commit)', 'freshness (now - newest commit)'],
    uniq(M.filter(function (m) { return m.table_name !== '*'; }).map(function (m) { return m.table_name + '|' + m.run_time; }))
      .sort().map(function (key) {
        var m = M.filter(function (x) { return x.table_name + '|' + x.run_time === key; })[0];
        return [m.table_name, m.run_time, m.latest_commit_time || '', el('td', {'class': 'n', 'data-field': 'lag'}, dur(m.lag_seconds)),
                el('td', {'class': 'n', 'data-field': 'freshness'}, dur(m.freshness_seconds))];
      }), 'freshness-table');

  // Samples
  var samples = document.getElementById('samples');
  table(samples, ['where', 'table', 'rules', 'reason', 'bronze record', 'file', 'ingested', 'record'],
    S.map(function (s) {
      return [el('td', {'data-kind': s.kind}, s.table), s.table_name || '', el('td', {'class': 'rules'}, (s.rules || []).join(', ')),
              s.reason, el('td', {'class': 'raw'}, s.bronze_record_id), s.bronze_file, s.bronze_ingest_time || '',
              el('td', {'class': 'raw'}, s.raw)];
    }), 'samples-table');
  document.body.setAttribute('data-rendered', 'true');
  document.getElementById('summary').textContent = M.length + ' metric rows, ' + runs.length + ' run(s), ' +
    tables.length + ' table group(s), ' + S.length + ' sample(s)';
})();
"""


def render(data: dict[str, Any]) -> str:
    """The HTML page for :func:`collect`'s ``data``: everything inline, nothing fetched."""
    payload = json.dumps(data, default=str).replace("</", "<\\/").replace("<!--", "<\\!--")
    title = "sqlcdc data quality"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<title>{title}</title><style>{_CSS}</style></head>
<body data-rendered="false">
<h1>{title}</h1>
<div class="meta">warehouse {html.escape(str(data.get("warehouse", "")))} · generated {html.escape(str(data.get("generated_at", "")))} · <span id="summary"></span></div>
<noscript>This page draws its charts with JavaScript.</noscript>
<h2>Runs and balance (landed = silver + quarantine + dropped + skipped)</h2><div id="balance"></div>
<h2>Latest run per table</h2><div id="latest"></div>
<h2>Failures over time (failed rows per run, per rule)</h2><div id="charts"></div>
<h2>Freshness and lag</h2><div id="freshness"></div>
<h2>Quarantine and dropped samples (latest first)</h2><div id="samples"></div>
<script id="dq-data" type="application/json">{payload}</script>
<script>{_JS}</script>
</body></html>
"""


def write(spark, warehouse: Path, out: Path, *, samples: int = 25) -> Path:
    """Collect from ``warehouse`` and write the page to ``out``."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(collect(spark, warehouse, samples=samples)), encoding="utf-8")
    return out
