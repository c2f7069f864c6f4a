/* tokenmark web UI: the upload form. The token goes in an Authorization header (a plain
   form post could not set it, which is what keeps other sites from uploading); the
   answer is shown as text, never as HTML. */
(function () {
  "use strict";
  var form = document.getElementById("upload-form");
  if (!form) { return; }
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var file = document.getElementById("upload-file").files[0];
    var token = document.getElementById("upload-token").value;
    var out = document.getElementById("upload-result");
    if (!file) { return; }
    out.textContent = "uploading...";
    fetch("/api/upload", { method: "POST", body: file,
                           headers: { "Authorization": "Bearer " + token,
                                      "Content-Type": "application/octet-stream" } })
      .then(function (r) { return r.json().then(function (j) { return [r.status, j]; }); })
      .then(function (a) { out.textContent = a[0] + " " + JSON.stringify(a[1], null, 2); })
      .catch(function (e) { out.textContent = "failed: " + e; });
  });
}());

/* A scaling run's curves (the series page): efficiency against replicas, with the
   repeats' interval as a band and the ideal (1) as a dashed line, and output tokens/s
   against replicas beside perfect scaling from the first count. Data from the page's
   <script id="tm-data">; labels set as text only. */
(function () {
  "use strict";
  var divs = document.querySelectorAll("div.ui-plot[data-plot]");
  var el = document.getElementById("tm-data");
  if (!divs.length || !el || typeof uPlot === "undefined") { return; }
  var pts = (JSON.parse(el.textContent).scaling || []).filter(function (p) {
    return p.replicas !== null && p.efficiency !== null;
  });
  function num(v) { return (v === null || v === undefined) ? null : +v; }
  Array.prototype.forEach.call(divs, function (div) {
    div.textContent = "";
    if (!pts.length) { div.setAttribute("data-empty", "1"); div.textContent = "no data to draw"; return; }
    var xs = pts.map(function (p) { return p.replicas; });
    var kind = div.getAttribute("data-plot");
    var series, data;
    if (kind === "scaling-efficiency") {
      data = [xs, pts.map(function (p) { return num(p.efficiency); }),
              pts.map(function (p) { return num(p.low); }),
              pts.map(function (p) { return num(p.high); }),
              xs.map(function () { return 1; })];
      series = [{ label: "replicas" },
                { label: "efficiency", stroke: "#1f77b4", width: 2, points: { show: true, size: 8 } },
                { label: "interval low", stroke: "#9ecae1", dash: [4, 4] },
                { label: "interval high", stroke: "#9ecae1", dash: [4, 4] },
                { label: "ideal", stroke: "#7f7f7f", dash: [6, 4] }];
    } else {
      var base = pts[0].tokens_per_s / pts[0].replicas;
      data = [xs, pts.map(function (p) { return num(p.tokens_per_s); }),
              xs.map(function (x) { return base * x; })];
      series = [{ label: "replicas" },
                { label: "output tokens/s", stroke: "#d62728", width: 2, points: { show: true, size: 8 } },
                { label: "perfect scaling", stroke: "#7f7f7f", dash: [6, 4] }];
    }
    var opts = { title: div.getAttribute("data-title") || kind,
                 width: Math.max(320, Math.min(div.clientWidth || 600, 900)),
                 height: +(div.getAttribute("data-height") || 280),
                 scales: { x: { time: false } },
                 axes: [{ label: "replicas", splits: function () { return xs; },
                          values: function (u, vals) { return vals.map(String); } }, { label: kind === "scaling-efficiency" ? "efficiency" : "output tokens/s", size: 70 }],
                 series: series };
    new uPlot(opts, data, div);
    div.setAttribute("data-drawn", String(xs.length));
  });
}());
