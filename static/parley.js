// Shared by every page of the admin UI: times in the browser's own time zone, and server-rendered HTML
// fragments (escaped by the templates) turned into nodes for the pages that update live.
(function () {
  "use strict";

  function localize(root) {
    (root || document).querySelectorAll("time[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (!isNaN(when)) {
        el.textContent = when.toLocaleString([], {dateStyle: "medium", timeStyle: "short"});
        el.title = el.getAttribute("datetime");
      }
    });
  }

  function fragment(html) {
    var template = document.createElement("template");
    template.innerHTML = html;
    localize(template.content);
    return template.content;
  }

  // GET a fragment as text (rejects on an error status).
  function getHTML(url) {
    return window.fetch(url, {headers: {Accept: "text/html"}, credentials: "same-origin"}).then(function (response) {
      if (!response.ok) {
        throw new Error("HTTP " + response.status);
      }
      return response.text();
    });
  }

  window.Parley = {localize: localize, fragment: fragment, getHTML: getHTML};
  document.addEventListener("DOMContentLoaded", function () {
    localize();
  });
})();
