// Contacts > Import: sends the chosen file as the request body (streamed to disk by the server; the XSRF
// token goes in the X-XSRFToken header because the server checks it before reading any body), and polls a
// running import's progress. No inline script: the pages' CSP is default-src 'self'.
"use strict";

(function () {
  function uploadForm(form) {
    var input = form.querySelector("input[type=file]");
    var bar = document.getElementById("upload-progress");
    var status = document.getElementById("upload-status");
    var button = form.querySelector("button[type=submit]");
    var maxBytes = parseInt(form.dataset.maxBytes, 10);

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var file = input.files[0];
      if (!file) { return; }
      if (file.size > maxBytes) {
        status.textContent = "This file is larger than " + Math.round(maxBytes / 1048576) + " MB: split it in parts.";
        return;
      }
      var xhr = new XMLHttpRequest();
      xhr.open("POST", form.action + "?name=" + encodeURIComponent(file.name));
      xhr.setRequestHeader("X-XSRFToken", form.querySelector("input[name=_xsrf]").value);
      xhr.setRequestHeader("Content-Type", "text/csv");
      xhr.upload.addEventListener("progress", function (e) {
        if (e.lengthComputable) { bar.value = Math.floor(100 * e.loaded / e.total); }
      });
      xhr.addEventListener("load", function () {
        var answer = null;
        try { answer = JSON.parse(xhr.responseText); } catch (e) { answer = null; }
        if (xhr.status === 201 && answer) {
          window.location.assign(answer.url);
          return;
        }
        button.disabled = false;
        bar.hidden = true;
        status.textContent = (answer && answer.error && answer.error.message) ||
          ("The upload failed (HTTP " + xhr.status + ").");
      });
      xhr.addEventListener("error", function () {
        button.disabled = false;
        bar.hidden = true;
        status.textContent = "The upload was cut off. Check the file's size and your connection, then try again.";
      });
      button.disabled = true;
      bar.hidden = false;
      bar.value = 0;
      status.textContent = "Uploading " + file.name + "…";
      xhr.send(file);
    });
  }

  function progressPanel(panel) {
    var url = panel.dataset.progressUrl;
    var bar = document.getElementById("import-bar");
    var percent = document.getElementById("import-percent");
    var label = document.getElementById("import-status");
    var active = { queued: true, running: true };
    if (!active[panel.dataset.status]) { return; }

    function show(p) {
      bar.value = p.percent;
      bar.textContent = p.percent + " %";
      percent.textContent = p.percent;
      label.textContent = p.statusLabel;
      panel.querySelectorAll("[data-field]").forEach(function (el) {
        var value = p[el.dataset.field];
        if (value === null || value === undefined) { el.textContent = "–"; }
        else if (el.dataset.field === "secondsLeft") { el.textContent = value + " s"; }
        else { el.textContent = value; }
      });
    }

    function poll() {
      fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (p) {
          if (p) {
            show(p);
            if (!active[p.status]) {  // finished: the page shows its final links (error report)
              window.location.reload();
              return;
            }
          }
          window.setTimeout(poll, 1000);
        })
        .catch(function () { window.setTimeout(poll, 3000); });
    }
    window.setTimeout(poll, 500);
  }

  var form = document.getElementById("upload-form");
  if (form) { uploadForm(form); }
  var panel = document.getElementById("import-progress");
  if (panel) { progressPanel(panel); }
})();
