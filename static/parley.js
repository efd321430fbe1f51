// Shared by every page of the admin UI: times in the browser's own time zone, and server-rendered HTML
// fragments (escaped by the templates) turned into nodes, and fetched again, for the pages that update live.
(function () {
  "use strict";

  function localize(root) {
    (root || document).querySelectorAll("time[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (!isNaN(when)) {
        // data-format="time-if-today": "16:04" for a time later today, the date too otherwise.
        var today = el.dataset.format === "time-if-today" && when.toDateString() === new Date().toDateString();
        el.textContent = today ? when.toLocaleTimeString([], {timeStyle: "short"})
          : when.toLocaleString([], {dateStyle: "medium", timeStyle: "short"});
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

  // A part of a live page fetched again from element.dataset.src (a fragment) and swapped in: the returned
  // function asks for it. One fetch at a time, at most one every minInterval ms; asked meanwhile, it fetches
  // once more afterwards (a burst of events costs two fetches, not one each). swapped() runs after each swap.
  function refresher(element, minInterval, swapped) {
    var timer = null;
    var inFlight = false;
    var again = false;
    var last = 0;

    function run() {
      timer = null;
      if (inFlight) {
        again = true;
        return;
      }
      inFlight = true;
      last = Date.now();
      getHTML(element.dataset.src)
        .then(function (html) {
          element.replaceChildren(fragment(html));
          element.dataset.refreshed = String(Date.now());
          if (swapped) {
            swapped();
          }
        })
        .catch(function () {})
        .finally(function () {
          inFlight = false;
          if (again) {
            again = false;
            schedule();
          }
        });
    }

    function schedule() {
      if (timer === null) {
        timer = window.setTimeout(run, Math.max(0, last + minInterval - Date.now()));
      }
    }
    return schedule;
  }

  // A form's utc_offset field: the browser's offset from UTC in minutes (snooze presets count in local time).
  function setUtcOffset(form) {
    var field = form.querySelector("input[name=utc_offset]");
    if (field) {
      field.value = String(-new Date().getTimezoneOffset());
    }
  }

  window.Parley = {localize: localize, fragment: fragment, getHTML: getHTML, refresher: refresher,
                   setUtcOffset: setUtcOffset};
  // A "Copy" button (data-copy="#selector") copies that field's value; the button says so for a moment.
  function copyOnClick(event) {
    var button = event.target.closest("button[data-copy]");
    var field = button && document.querySelector(button.dataset.copy);
    if (!field) {
      return;
    }
    field.select();
    var done = function () {
      button.textContent = "Copied";
    };
    if (navigator.clipboard) {
      navigator.clipboard.writeText(field.value).then(done, function () {
        document.execCommand("copy") && done();
      });
    } else if (document.execCommand("copy")) {
      done();
    }
  }

  // The navigation's counts ("Needs a person", also in the title; "Unread"), on every page: pushed by the live
  // socket (static/live.js: "parley:counts" after it connects and after every change), never asked for; a
  // browser notification when the handoffs grow and the user has allowed them.
  var canNotify = "Notification" in window;

  function offerNotifications() {
    var allow = document.getElementById("notify-allow");
    if (allow && document.getElementById("needs-person") && canNotify && Notification.permission === "default") {
      allow.hidden = false;
      allow.addEventListener("click", function () {
        Notification.requestPermission().then(function () {
          allow.hidden = true;
        });
      });
    }
  }

  function showCount(badge, next) {
    var before = Number(badge.dataset.count);
    badge.dataset.count = String(next);
    badge.querySelector(".count").textContent = String(next);
    badge.hidden = next === 0;
    return before;
  }

  // Listened for from the start (parley.js runs before live.js): no frame can come before the listener.
  document.addEventListener("parley:counts", function (event) {
    var needs = document.getElementById("needs-person");
    var unread = document.getElementById("nav-unread");
    var next = event.detail.needsPerson;
    if (needs && typeof next === "number") {
      if (next > showCount(needs, next) && canNotify && Notification.permission === "granted") {
        new Notification("Parley: a conversation needs a person", {body: next + " waiting", tag: "parley-needs-person"});
      }
      document.title = (next ? "(" + next + ") " : "") + document.title.replace(/^\(\d+\) /, "");
    }
    if (unread && typeof event.detail.unread === "number") {
      showCount(unread, event.detail.unread);
    }
  });

  // An input with data-suggest="/url" and list="<datalist id>": as the person types, the datalist gets the
  // <option>s GET url?q=<text> answers (the list page's contact picker). One fetch at a time; the latest text wins.
  function suggestions() {
    document.querySelectorAll("input[data-suggest][list]").forEach(function (input) {
      var datalist = document.getElementById(input.getAttribute("list"));
      var busy = false, asked = null, shown = null;
      function fetchFor(text) {
        busy = true;
        asked = null;
        getHTML(input.dataset.suggest + "?q=" + encodeURIComponent(text))
          .then(function (html) {
            shown = text;
            datalist.replaceChildren(fragment(html));
          })
          .catch(function () {})
          .finally(function () {
            busy = false;
            if (asked !== null && asked !== shown) {
              fetchFor(asked);
            }
          });
      }
      input.addEventListener("input", function () {
        var text = input.value.trim();
        if (text.length < 2 || text === shown) {
          return;
        }
        if (busy) {
          asked = text;
        } else {
          fetchFor(text);
        }
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localize();
    document.addEventListener("click", copyOnClick);
    offerNotifications();
    suggestions();
  });
})();
