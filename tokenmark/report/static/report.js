/* tokenmark report plots: draws every <div class="plot" data-plot=...> of the page with
   uPlot from the JSON in <script id="tm-data" type="application/json">.
   Used unchanged by the self-contained HTML report (inlined) and the web UI (served from
   /static). Never builds HTML from data: labels are set with textContent only. */
(function () {
  "use strict";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];

  function readData() {
    var el = document.getElementById("tm-data");
    return el ? JSON.parse(el.textContent) : null;
  }

  function width(div) {
    return Math.max(320, Math.min(div.clientWidth || 600, 1100));
  }

  function vline(value, color, label) {
    // a uPlot draw hook: a dashed vertical line at x = value (a latency limit)
    return function (u) {
      if (value === null || value === undefined) { return; }
      var x = u.valToPos(value, "x", true);
      if (!isFinite(x) || x < u.bbox.left || x > u.bbox.left + u.bbox.width) { return; }
      var ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = color;
      ctx.setLineDash([6, 4]);
      ctx.lineWidth = 2 * uPlot.pxRatio;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      ctx.fillStyle = color;
      ctx.font = (11 * uPlot.pxRatio) + "px sans-serif";
      ctx.fillText(label, x + 4 * uPlot.pxRatio, u.bbox.top + 12 * uPlot.pxRatio);
      ctx.restore();
    };
  }

  function pointsOnly(label, color) {
    return { label: label, stroke: color, fill: color, width: 0,
             paths: function () { return null; },
             points: { show: true, size: 8, fill: color, stroke: color } };
  }

  function xScale(xs, limit) {
    // linear, or logarithmic when the values (and the limit) span a wide range; the
    // range always takes in the limit, so a distribution far below it shows as such
    var lo = Infinity, hi = -Infinity;
    xs.forEach(function (v) { if (v !== null) { lo = Math.min(lo, v); hi = Math.max(hi, v); } });
    if (limit !== null && limit !== undefined) { hi = Math.max(hi, limit * 1.05); }
    if (!isFinite(lo)) { return { time: false }; }
    var log = lo > 0 && hi / lo > 30;
    if (hi === lo) { lo = lo * 0.9; hi = hi * 1.1 + (hi === 0 ? 1 : 0); }
    return { time: false, distr: log ? 3 : 1,
             range: log ? [lo / 1.1, hi * 1.1] : [Math.min(0, lo), hi] };
  }

  function make(div, opts, data) {
    div.textContent = "";
    opts.width = width(div);
    opts.height = +(div.getAttribute("data-height") || 260);
    var plot = new uPlot(opts, data, div);
    div.setAttribute("data-drawn", String(data[0].length));
    return plot;
  }

  function cdfPlot(div, d) {
    var pairs = Object.keys(d.percentiles).map(function (k) {
      return [d.percentiles[k], parseFloat(k) / 100];
    }).sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    var px = pairs.map(function (p) { return p[0]; });
    var py = pairs.map(function (p) { return p[1]; });
    var joined = uPlot.join([[d.cdf.x, d.cdf.y], [px, py]]);
    var hooks = {};
    if (d.limit !== null) {
      hooks.draw = [vline(d.limit, "#d62728", "limit " + d.limit + " ms")];
    }
    return make(div, {
      title: d.title + " - CDF (ms)",
      scales: { x: xScale(d.cdf.x, d.limit), y: { range: [0, 1] } },
      axes: [{ label: "ms" }, { label: "fraction at or below" }],
      series: [{ label: "ms" },
               { label: "CDF", stroke: COLORS[0], width: 2, spanGaps: true },
               pointsOnly("exact percentiles (results.json)", "#ff7f0e")],
      hooks: hooks
    }, joined);
  }

  function histPlot(div, d) {
    var h = d.hist;
    var ys = h.counts.concat([0]);
    var hooks = {};
    if (d.limit !== null) {
      hooks.draw = [vline(d.limit, "#d62728", "limit " + d.limit + " ms")];
    }
    return make(div, {
      title: d.title + " - histogram",
      scales: { x: xScale(h.edges, d.limit) },
      axes: [{ label: "ms" }, { label: "count" }],
      series: [{ label: "ms" },
               { label: "count", stroke: COLORS[0], fill: "rgba(31,119,180,0.25)",
                 paths: uPlot.paths.stepped({ align: 1 }) }],
      hooks: hooks
    }, [h.edges, ys]);
  }

  function timePlot(div, s, kind) {
    var t = s.t, series = [{ label: "s" }], data = [t], scales = { x: { time: false } };
    var axes = [{ label: "seconds from the start" }];
    function add(label, ys, color, scale) {
      series.push({ label: label, stroke: color, width: 1.5, scale: scale || "y",
                    spanGaps: false });
      data.push(ys);
    }
    if (kind === "throughput") {
      add("output tokens/s", s.output_tokens_per_s, COLORS[0]);
      add("completed requests/s", s.completed_per_s, COLORS[2], "r");
      add("in flight", s.in_flight, COLORS[3], "r");
      axes.push({ label: "tokens/s" }, { label: "requests", side: 1, scale: "r",
                                         grid: { show: false } });
    } else if (kind === "send_lag") {
      add("send lag max (ms)", s.send_lag_max_ms, COLORS[1]);
      add("send lag mean (ms)", s.send_lag_mean_ms, COLORS[0]);
      axes.push({ label: "ms" });
    } else if (kind === "errors") {
      var names = Object.keys(s.errors);
      names.forEach(function (n, i) { add(n, s.errors[n], COLORS[(i + 1) % COLORS.length]); });
      if (!names.length) { add("errors", t.map(function () { return 0; }), COLORS[1]); }
      axes.push({ label: "failed requests per bin" });
    } else if (kind === "endpoints") {
      Object.keys(s.endpoint_tokens_per_s).forEach(function (n, i) {
        add(n, s.endpoint_tokens_per_s[n], COLORS[i % COLORS.length]);
      });
      axes.push({ label: "output tokens/s" });
    }
    return make(div, { title: div.getAttribute("data-title") || kind, scales: scales,
                       axes: axes, series: series }, data);
  }

  function paretoPlot(div, cmp, metric) {
    var pts = cmp.points.filter(function (p) {
      return p.throughput !== null && p.latency[metric] !== null;
    }).slice().sort(function (a, b) { return a.throughput - b.throughput; });
    var xs = pts.map(function (p) { return p.throughput; });
    var ys = pts.map(function (p) { return p.latency[metric]; });
    var front = pts.map(function (p) { return p.front[metric] ? p.latency[metric] : null; });
    return make(div, {
      title: "Throughput against " + metric.toUpperCase() + " p" + cmp.percentile_label +
             " (Pareto front joined)",
      scales: { x: { time: false } },
      axes: [{ label: cmp.throughput_label }, { label: metric.toUpperCase() + " (ms)" }],
      series: [{ label: cmp.throughput_label },
               pointsOnly("runs", COLORS[0]),
               { label: "Pareto front", stroke: COLORS[1], width: 2, spanGaps: true,
                 points: { show: true, size: 10, stroke: COLORS[1], fill: "#fff" } }]
    }, [xs, ys, front]);
  }

  function draw() {
    var data = readData();
    if (!data || typeof uPlot === "undefined") { return; }
    var byName = {};
    (data.distributions || []).forEach(function (d) { byName[d.name] = d; });
    var plots = document.querySelectorAll("div.plot[data-plot]");
    Array.prototype.forEach.call(plots, function (div) {
      var kind = div.getAttribute("data-plot");
      var d = byName[div.getAttribute("data-metric")];
      try {
        if (kind === "cdf" && d && d.cdf.x.length) { cdfPlot(div, d); }
        else if (kind === "hist" && d && d.hist && d.hist.edges.length) { histPlot(div, d); }
        else if (kind === "time" && data.series) {
          timePlot(div, data.series, div.getAttribute("data-series"));
        } else if (kind === "pareto" && data.comparison) {
          paretoPlot(div, data.comparison, div.getAttribute("data-metric"));
        } else { div.setAttribute("data-empty", "1"); div.textContent = "no data to draw"; }
      } catch (e) {
        div.setAttribute("data-error", String(e));
        div.textContent = "could not draw: " + e;
      }
    });
    document.body.setAttribute("data-plots-ready", "1");
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", draw);
  } else {
    draw();
  }
}());
