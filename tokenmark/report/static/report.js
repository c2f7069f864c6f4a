/* tokenmark report plots: draws every <div class="plot" data-plot=...> of the page with
   uPlot from the JSON in <script id="tm-data" type="application/json">.
   Used unchanged by the self-contained HTML report (inlined) and the web UI (served from
   /static). Never builds HTML from data: labels are set with textContent only.

   Readability rules every plot follows: log axes tick at 1-2-5 per decade (or at round
   linear steps when the range is under half a decade) with short labels (500, 1k, 20k);
   axes are as wide as their longest tick label, so axis titles never overlap them; the
   legend names the series only (no empty value cells) and is left out for a single
   series; a plot with no data is not drawn (the page says so in words). */
(function () {
  "use strict";
  var COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939"];
  var LIMIT = "#d62728";
  // a comparison's groups: no red (limits, runs over them) and no green (the front)
  var GROUP_COLORS = ["#1f77b4", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                      "#7f7f7f", "#bcbd22", "#393b79", "#637939"];
  // tick steps of a count axis: whole numbers only
  var INTEGER_STEPS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5,
                       2e5, 5e5, 1e6];

  function readData() {
    var el = document.getElementById("tm-data");
    return el ? JSON.parse(el.textContent) : null;
  }

  function width(div) {
    return Math.max(320, Math.min(div.clientWidth || 600, 1100));
  }

  /* ---- numbers and ticks ---- */

  function fmtNum(v) {
    // short, round labels: 0.05, 2.5, 750, 1k, 2.5k, 20k, 1M
    if (v === null || v === undefined || !isFinite(v)) { return ""; }
    var a = Math.abs(v);
    function trim(x) { return String(Number(x.toPrecision(4))); }
    if (a >= 1e6) { return trim(v / 1e6) + "M"; }
    if (a >= 1e3) { return trim(v / 1e3) + "k"; }
    return trim(v);
  }

  function linearTicks(min, max, most) {
    // round steps (1, 2 or 5 x 10^k) giving at most `most` ticks inside [min, max]
    var span = max - min;
    if (!(span > 0)) { return [min]; }
    var step = Math.pow(10, Math.floor(Math.log10(span / most)));
    var mults = [1, 2, 5, 10], i = 0;
    while (span / (step * mults[i]) > most && i < mults.length - 1) { i++; }
    step *= mults[i];
    var out = [];
    for (var t = Math.ceil(min / step) * step; t <= max * (1 + 1e-9); t += step) {
      out.push(Number(t.toPrecision(12)));
    }
    return out;
  }

  function logTicks(min, max) {
    // 1-2-5 per decade; 1 per decade when that is too many; round linear steps when
    // the range is under half a decade (too few round log values inside it)
    if (!(min > 0) || !(max > min)) { return [min]; }
    if (Math.log10(max / min) < 0.5) { return linearTicks(min, max, 6); }
    var sets = [[1, 2, 5], [1]], lo = Math.floor(Math.log10(min)), hi = Math.ceil(Math.log10(max));
    for (var s = 0; s < sets.length; s++) {
      var out = [];
      for (var k = lo; k <= hi; k++) {
        sets[s].forEach(function (m) {
          var v = Number((m * Math.pow(10, k)).toPrecision(12));
          if (v >= min * (1 - 1e-9) && v <= max * (1 + 1e-9)) { out.push(v); }
        });
      }
      if (out.length <= 10 || s === sets.length - 1) {
        if (out.length > 10) {  // many decades: every n-th decade
          var n = Math.ceil(out.length / 10);
          out = out.filter(function (_, i) { return i % n === 0; });
        }
        return out;
      }
    }
    return [];
  }

  function axisSize(u, values, axisIdx, cycleNum) {
    // as wide as the longest tick label, plus the tick and gap (uPlot's autosize recipe)
    var axis = u.axes[axisIdx];
    if (cycleNum > 1) { return axis._size; }
    var size = axis.ticks.size + axis.gap + 6;
    var longest = (values || []).reduce(function (acc, v) {
      return v && String(v).length > acc.length ? String(v) : acc;
    }, "");
    if (longest !== "") {
      u.ctx.font = axis.font[0];
      size += u.ctx.measureText(longest).width / uPlot.pxRatio;
    }
    return Math.ceil(size);
  }

  function axis(label, log, extra) {
    // every split gets its label (uPlot's default filter hides most on log axes)
    var a = { label: label, values: function (u, splits) { return splits.map(fmtNum); },
              filter: function (u, splits) { return splits; }, labelGap: 4 };
    if (log) {
      a.splits = function (u, i, min, max) { return logTicks(min, max); };
    }
    return Object.assign(a, extra || {});
  }

  function yAxis(label, log, extra) {
    return axis(label, log, Object.assign({ size: axisSize }, extra || {}));
  }

  function logRange(lo, hi) {
    // a log scale's range: the data with a margin, never empty
    if (hi <= lo) { return [lo / 1.5, hi * 1.5]; }
    return [lo / 1.15, hi * 1.15];
  }

  function extent(arrays, extra) {
    var lo = Infinity, hi = -Infinity;
    arrays.forEach(function (xs) {
      xs.forEach(function (v) {
        if (v !== null && v !== undefined && isFinite(v)) {
          lo = Math.min(lo, v); hi = Math.max(hi, v);
        }
      });
    });
    (extra || []).forEach(function (v) {
      if (v !== null && v !== undefined && isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
    });
    return [lo, hi];
  }

  function xScale(xs, limit) {
    // linear, or logarithmic when the values (and the limit) span a wide range; the
    // range always takes in the limit, so a distribution far below it shows as such
    var e = extent([xs], limit === null || limit === undefined ? [] : [limit * 1.05]);
    var lo = e[0], hi = e[1];
    if (!isFinite(lo)) { return { time: false }; }
    var log = lo > 0 && hi / lo > 30;
    if (hi === lo) { lo = lo * 0.9; hi = hi * 1.1 + (hi === 0 ? 1 : 0); }
    return { time: false, distr: log ? 3 : 1, log: 10,
             range: log ? logRange(lo, hi) : [Math.min(0, lo), hi] };
  }

  /* ---- drawing helpers (uPlot draw hooks) ---- */

  function text(u, s, x, y, color, align) {
    // a label on a white box, so lines under it do not strike it through
    var ctx = u.ctx, r = uPlot.pxRatio;
    ctx.font = (11 * r) + "px sans-serif";
    ctx.textAlign = align || "left";
    var w = ctx.measureText(s).width, left = align === "right" ? x - w : x;
    ctx.fillStyle = "rgba(255,255,255,0.85)";
    ctx.fillRect(left - 2 * r, y - 10 * r, w + 4 * r, 13 * r);
    ctx.fillStyle = color;
    ctx.fillText(s, x, y);
  }

  function inBox(u, x, y) {
    var b = u.bbox;
    return isFinite(x) && isFinite(y) && x >= b.left - 1 && x <= b.left + b.width + 1 &&
           y >= b.top - 1 && y <= b.top + b.height + 1;
  }

  function vline(value, label) {
    // a dashed vertical line at x = value (a latency limit)
    return function (u) {
      if (value === null || value === undefined) { return; }
      var x = u.valToPos(value, "x", true);
      if (!isFinite(x) || x < u.bbox.left || x > u.bbox.left + u.bbox.width) { return; }
      var ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = LIMIT;
      ctx.setLineDash([6, 4]);
      ctx.lineWidth = 2 * uPlot.pxRatio;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
      var right = x > u.bbox.left + u.bbox.width * 0.75;
      text(u, label, x + (right ? -4 : 4) * uPlot.pxRatio, u.bbox.top + 12 * uPlot.pxRatio,
           LIMIT, right ? "right" : "left");
      ctx.restore();
    };
  }

  function hlines(limits, label) {
    // dashed horizontal lines at y = each limit
    return function (u) {
      var ctx = u.ctx;
      ctx.save();
      (limits || []).forEach(function (v) {
        var y = u.valToPos(v, "y", true);
        if (!isFinite(y) || y < u.bbox.top || y > u.bbox.top + u.bbox.height) { return; }
        ctx.strokeStyle = LIMIT;
        ctx.setLineDash([6, 4]);
        ctx.lineWidth = 2 * uPlot.pxRatio;
        ctx.beginPath();
        ctx.moveTo(u.bbox.left, y);
        ctx.lineTo(u.bbox.left + u.bbox.width, y);
        ctx.stroke();
        text(u, label + " " + fmtNum(v) + " ms", u.bbox.left + 4 * uPlot.pxRatio,
             y - 5 * uPlot.pxRatio, LIMIT);
      });
      ctx.restore();
    };
  }

  function polyline(pts, color, dash, width) {
    // a line through pts ([x, y] in data units, in the given order)
    return function (u) {
      var xy = pts.map(function (p) {
        return [u.valToPos(p[0], "x", true), u.valToPos(p[1], "y", true)];
      }).filter(function (p) { return isFinite(p[0]) && isFinite(p[1]); });
      if (xy.length < 2) { return; }
      var ctx = u.ctx;
      ctx.save();
      ctx.beginPath();
      ctx.rect(u.bbox.left, u.bbox.top, u.bbox.width, u.bbox.height);
      ctx.clip();
      ctx.strokeStyle = color;
      ctx.lineWidth = (width || 1.5) * uPlot.pxRatio;
      ctx.setLineDash(dash || []);
      ctx.beginPath();
      ctx.moveTo(xy[0][0], xy[0][1]);
      for (var i = 1; i < xy.length; i++) { ctx.lineTo(xy[i][0], xy[i][1]); }
      ctx.stroke();
      ctx.restore();
    };
  }

  function rings(pts, color, radius) {
    // an open ring around each point (runs on the Pareto front, runs over the limit)
    return function (u) {
      var ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = color;
      ctx.lineWidth = 2 * uPlot.pxRatio;
      pts.forEach(function (p) {
        var x = u.valToPos(p[0], "x", true), y = u.valToPos(p[1], "y", true);
        if (!inBox(u, x, y)) { return; }
        ctx.beginPath();
        ctx.arc(x, y, radius * uPlot.pxRatio, 0, 2 * Math.PI);
        ctx.stroke();
      });
      ctx.restore();
    };
  }

  function labels(pts, names, color) {
    // a short name beside each point (a sweep's rate); a label that would overlap one
    // already drawn is left out (the table below names every run)
    return function (u) {
      var ctx = u.ctx, r = uPlot.pxRatio, boxes = [];
      ctx.save();
      ctx.font = (11 * r) + "px sans-serif";
      pts.forEach(function (p, i) {
        var x = u.valToPos(p[0], "x", true), y = u.valToPos(p[1], "y", true);
        if (!names[i] || !inBox(u, x, y)) { return; }
        var w = ctx.measureText(names[i]).width, h = 12 * r;
        var right = x + 10 * r + w > u.bbox.left + u.bbox.width;
        var left = right ? x - 10 * r - w : x + 10 * r, top = y - 8 * r - h;
        var box = [left, top, left + w, top + h];
        if (boxes.some(function (b) {
          return box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3];
        })) { return; }
        boxes.push(box);
        text(u, names[i], left, top + h - 2 * r, color, "left");
      });
      ctx.restore();
    };
  }

  function pointsOnly(label, color, hollow) {
    return { label: label, stroke: color, fill: hollow ? "#fff" : color, width: 0,
             paths: function () { return null; },
             points: { show: true, size: 9, width: 2, fill: hollow ? "#fff" : color,
                       stroke: color } };
  }

  function make(div, opts, data) {
    div.textContent = "";
    opts.width = width(div);
    opts.height = +(div.getAttribute("data-height") || 260);
    // the legend names the series (no value cells: "live" off); none for one series
    opts.legend = { show: opts.series.length > 2, live: false };
    opts.padding = [12, 16, 0, 0];
    var plot = new uPlot(opts, data, div);
    div.tmPlot = plot;  // for the browser tests: ticks, axis sizes
    div.setAttribute("data-drawn", String(data[0].length));
    return plot;
  }

  /* ---- one run ---- */

  function dots(pts, color) {
    // points at [x, y] in data units (no series of their own: the x values of a CDF
    // repeat, which a joined series would collapse)
    return function (u) {
      var ctx = u.ctx;
      ctx.save();
      ctx.fillStyle = color;
      pts.forEach(function (p) {
        var x = u.valToPos(p[0], "x", true), y = u.valToPos(p[1], "y", true);
        if (!inBox(u, x, y)) { return; }
        ctx.beginPath();
        ctx.arc(x, y, 4.5 * uPlot.pxRatio, 0, 2 * Math.PI);
        ctx.fill();
      });
      ctx.restore();
    };
  }

  function cdfPlot(div, d) {
    var pairs = Object.keys(d.percentiles).map(function (k) {
      return [d.percentiles[k], parseFloat(k) / 100];
    }).filter(function (p) { return p[0] !== null; });
    var hooks = { draw: [dots(pairs, COLORS[3])] };
    if (d.limit !== null) { hooks.draw.push(vline(d.limit, "limit " + fmtNum(d.limit) + " ms")); }
    // an empirical CDF is a staircase: one point per distinct value (its highest
    // fraction), from 0 at the first, drawn as steps; repeated values would otherwise
    // leave their rise undrawn (uPlot folds points of one pixel column)
    var xs = [], ys = [];
    d.cdf.x.forEach(function (x, i) {
      if (xs.length && xs[xs.length - 1] === x) { ys[ys.length - 1] = d.cdf.y[i]; }
      else { xs.push(x); ys.push(d.cdf.y[i]); }
    });
    xs.unshift(xs[0]);
    ys.unshift(0);
    var sx = xScale(d.cdf.x, d.limit);
    return make(div, {
      title: d.title + " - CDF",
      scales: { x: sx, y: { range: [0, 1] } },
      axes: [axis("ms", sx.distr === 3), yAxis("fraction at or below", false)],
      series: [{ label: "ms" },
               { label: "CDF", stroke: COLORS[0], width: 2, spanGaps: true,
                 paths: uPlot.paths.stepped({ align: 1 }), points: { show: false } }],
      hooks: hooks
    }, [xs, ys]);
  }

  function histPlot(div, d) {
    var h = d.hist;
    var ys = h.counts.concat([0]);
    var hooks = {};
    if (d.limit !== null) { hooks.draw = [vline(d.limit, "limit " + fmtNum(d.limit) + " ms")]; }
    var sx = xScale(h.edges, d.limit);
    return make(div, {
      title: d.title + " - histogram",
      scales: { x: sx },
      axes: [axis("ms", sx.distr === 3),
             yAxis(d.name === "itl" ? "output tokens" : "requests", false)],
      series: [{ label: "ms" },
               { label: "count", stroke: COLORS[0], fill: "rgba(31,119,180,0.25)",
                 paths: uPlot.paths.stepped({ align: 1 }) }],
      hooks: hooks
    }, [h.edges, ys]);
  }

  function timePlot(div, s, kind) {
    // rates, counts and lags start at zero (an axis from 25k makes a 5% dip a cliff)
    function fromZero(u, min, max) { return [0, max > 0 ? max * 1.08 : 1]; }
    var t = s.t, series = [{ label: "s" }], data = [t];
    var scales = { x: { time: false }, y: { range: fromZero }, r: { range: fromZero } };
    var axes = [axis("seconds from the start (bins of " + fmtNum(s.bin_s) + " s)", false)];
    function add(label, ys, color, scale) {
      series.push({ label: label, stroke: color, width: 1.5, scale: scale || "y",
                    spanGaps: false, points: { show: false } });
      data.push(ys);
    }
    if (kind === "throughput") {
      add("output tokens/s", s.output_tokens_per_s, COLORS[0]);
      add("completed requests/s", s.completed_per_s, COLORS[2], "r");
      add("requests in flight", s.in_flight, COLORS[3], "r");
      axes.push(yAxis("tokens/s", false),
                yAxis("requests/s, requests", false, { side: 1, scale: "r", grid: { show: false } }));
    } else if (kind === "send_lag") {
      add("send lag max (ms)", s.send_lag_max_ms, COLORS[1]);
      add("send lag mean (ms)", s.send_lag_mean_ms, COLORS[0]);
      axes.push(yAxis("ms", false));
    } else if (kind === "errors") {
      var names = Object.keys(s.errors);
      if (!names.length) { return null; }
      names.forEach(function (n, i) { add(n, s.errors[n], COLORS[(i + 1) % COLORS.length]); });
      axes.push(yAxis("failed requests per bin", false, { incrs: INTEGER_STEPS }));
    } else if (kind === "endpoints") {
      var eps = Object.keys(s.endpoint_tokens_per_s);
      if (!eps.length) { return null; }
      eps.forEach(function (n, i) { add(n, s.endpoint_tokens_per_s[n], COLORS[i % COLORS.length]); });
      axes.push(yAxis("output tokens/s", false));
    }
    return make(div, { title: div.getAttribute("data-title") || kind, scales: scales,
                       axes: axes, series: series }, data);
  }

  /* ---- comparisons ---- */

  function usable(cmp, metric) {
    return cmp.points.filter(function (p) {
      return p.throughput !== null && p.latency[metric] !== null && p.latency[metric] > 0;
    });
  }

  function rateName(p) {
    // the load a point was run at: its target rate, else its concurrency
    if (p.target_qps !== null) { return fmtNum(p.target_qps) + " q/s"; }
    return p.concurrency ? fmtNum(p.concurrency) + " streams" : "";
  }

  function groupsOf(cmp, pts) {
    // the runs of each group (one system, benchmark and scenario), in load order
    return (cmp.groups || [""]).map(function (g) {
      return pts.filter(function (p) { return (p.group || "") === g; });
    }).filter(function (ps) { return ps.length; });
  }

  function groupLabel(ps, many, fallback) {
    return many ? ps[0].group : fallback;
  }

  function curves(groups, xOf, yOf) {
    // uPlot data for one series per group: the x values of every group joined (sorted),
    // each group's y where it has a point
    var tables = groups.map(function (ps) {
      var pairs = ps.map(function (p) { return [xOf(p), yOf(p)]; })
        .filter(function (q) { return q[0] !== null && q[1] !== null; })
        .sort(function (a, b) { return a[0] - b[0]; });
      return [pairs.map(function (q) { return q[0]; }), pairs.map(function (q) { return q[1]; })];
    });
    return tables.length === 1 ? tables[0] : uPlot.join(tables);
  }

  function paretoPlot(div, cmp, metric) {
    // vLLM's sweep plot: latency (log) against throughput, one curve per group joined in
    // load order, the Pareto front over all runs in green, the limit dashed red
    var M = metric.toUpperCase(), pct = "p" + cmp.percentile_label;
    var pts = usable(cmp, metric);
    if (!pts.length) { return null; }
    var groups = groupsOf(cmp, pts), many = groups.length > 1;
    var limits = (cmp.limits || {})[metric] || [];
    var worst = limits.length ? Math.min.apply(null, limits) : null;
    function xy(p) { return [p.throughput, p.latency[metric]]; }
    var series = [{ label: cmp.throughput_label }], hooks = [hlines(limits, "limit " + pct)];
    groups.forEach(function (ps, i) {
      var c = GROUP_COLORS[i % GROUP_COLORS.length];
      series.push(pointsOnly(groupLabel(ps, many, "runs"), c));
      hooks.push(polyline(ps.map(xy), c, [4, 3]));
    });
    var front = pts.filter(function (p) { return p.front[metric]; }).map(xy)
      .sort(function (a, b) { return a[0] - b[0]; });
    var over = pts.filter(function (p) { return worst !== null && p.latency[metric] > worst; });
    hooks.push(polyline(front, COLORS[2], null, 2.5), rings(front, COLORS[2], 8),
               rings(over.map(xy), LIMIT, 5),
               labels(pts.map(xy), pts.map(rateName), "#444"));
    var ey = extent([pts.map(function (p) { return p.latency[metric]; })], limits);
    var ex = extent([pts.map(function (p) { return p.throughput; })]);
    return make(div, {
      title: M + " " + pct + " against throughput",
      scales: { x: { time: false, range: [0, ex[1] * 1.08] },
                y: { distr: 3, log: 10, range: logRange(ey[0], ey[1]) } },
      axes: [axis(cmp.throughput_label, false), yAxis(M + " " + pct + " (ms, log)", true)],
      series: series,
      hooks: { draw: hooks }
    }, curves(groups, function (p) { return p.throughput; },
              function (p) { return p.latency[metric]; }));
  }

  function latencyRatePlot(div, cmp, metric) {
    // GuideLLM's sweep plot: latency (log) against the achieved request rate; p50, p90
    // and p99 for one group, the comparison's percentile per group for several
    var M = metric.toUpperCase();
    var pts = cmp.points.filter(function (p) {
      return p.requests_per_second !== null && p.percentiles && p.percentiles[metric] &&
             Object.keys(p.percentiles[metric]).length;
    });
    if (!pts.length) { return null; }
    var groups = groupsOf(cmp, pts), many = groups.length > 1;
    var lines = [];  // [label, group runs, percentile key]
    if (many) {
      groups.forEach(function (ps) { lines.push([ps[0].group, ps, cmp.percentile_label]); });
    } else {
      var keys = [];
      pts.forEach(function (p) {
        Object.keys(p.percentiles[metric]).forEach(function (k) {
          if (keys.indexOf(k) < 0) { keys.push(k); }
        });
      });
      keys.sort(function (a, b) { return parseFloat(a) - parseFloat(b); });
      keys.forEach(function (k) { lines.push(["p" + k, pts, k]); });
    }
    function val(p, k) {
      var v = p.percentiles[metric][k];
      return v === undefined || v === null || !(v > 0) ? null : v;
    }
    var series = [{ label: "requests/s" }], all = [];
    lines.forEach(function (l, i) {
      series.push({ label: l[0], stroke: GROUP_COLORS[i % GROUP_COLORS.length], width: 2,
                    spanGaps: true, points: { show: true, size: 6 } });
      all.push(l[1].map(function (p) { return val(p, l[2]); }));
    });
    var xs = pts.map(function (p) { return p.requests_per_second; })
      .sort(function (a, b) { return a - b; })
      .filter(function (x, i, arr) { return i === 0 || x !== arr[i - 1]; });
    var data = [xs].concat(lines.map(function (l) {
      var ys = xs.map(function () { return null; });
      l[1].forEach(function (p) { ys[xs.indexOf(p.requests_per_second)] = val(p, l[2]); });
      return ys;
    }));
    var limits = (cmp.limits || {})[metric] || [];
    var ey = extent(all, limits), ex = extent([xs]);
    var pct = many ? " p" + cmp.percentile_label : "";
    return make(div, {
      title: M + pct + " against request rate",
      scales: { x: { time: false, range: [0, ex[1] * 1.08] },
                y: { distr: 3, log: 10, range: logRange(ey[0], ey[1]) } },
      axes: [axis("requests/s (achieved)", false), yAxis(M + pct + " (ms, log)", true)],
      series: series,
      hooks: { draw: [hlines(limits, "limit at p" + cmp.percentile_label)] }
    }, data);
  }

  function ratePlot(div, cmp) {
    // achieved against offered load, one line per group: where the server saturates
    var pts = cmp.points.filter(function (p) {
      return p.target_qps !== null && p.requests_per_second !== null;
    });
    if (pts.length < 2) { return null; }
    var groups = groupsOf(cmp, pts), many = groups.length > 1;
    var top = Math.max(Math.max.apply(null, pts.map(function (p) { return p.target_qps; })),
                       Math.max.apply(null, pts.map(function (p) { return p.requests_per_second; })));
    var series = [{ label: "offered" }];
    groups.forEach(function (ps, i) {
      series.push({ label: groupLabel(ps, many, "achieved requests/s"),
                    stroke: GROUP_COLORS[i % GROUP_COLORS.length], width: 2, spanGaps: true,
                    points: { show: true, size: 7 } });
    });
    return make(div, {
      title: "Achieved against offered request rate",
      scales: { x: { time: false, range: [0, top * 1.08] }, y: { range: [0, top * 1.08] } },
      axes: [axis("offered requests/s (target)", false), yAxis("achieved requests/s", false)],
      series: series,
      hooks: { draw: [polyline([[0, 0], [top * 1.08, top * 1.08]], "#9aa4ae", [4, 3]),
                      function (u) {
                        var x = u.valToPos(top, "x", true), y = u.valToPos(top, "y", true);
                        u.ctx.save();
                        text(u, "achieved = offered", x - 4 * uPlot.pxRatio, y + 14 * uPlot.pxRatio,
                             "#6e7781", "right");
                        u.ctx.restore();
                      }] }
    }, curves(groups, function (p) { return p.target_qps; },
              function (p) { return p.requests_per_second; }));
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
      var cmp = data.comparison, metric = div.getAttribute("data-metric"), drawn = null;
      try {
        if (kind === "cdf" && d && d.cdf.x.length) { drawn = cdfPlot(div, d); }
        else if (kind === "hist" && d && d.hist && d.hist.edges.length) { drawn = histPlot(div, d); }
        else if (kind === "time" && data.series) {
          drawn = timePlot(div, data.series, div.getAttribute("data-series"));
        } else if (kind === "pareto" && cmp) { drawn = paretoPlot(div, cmp, metric); }
        else if (kind === "latency-rate" && cmp) { drawn = latencyRatePlot(div, cmp, metric); }
        else if (kind === "rate" && cmp) { drawn = ratePlot(div, cmp); }
        if (!drawn) { div.setAttribute("data-empty", "1"); div.textContent = "no data to draw"; }
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
