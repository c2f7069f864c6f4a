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
