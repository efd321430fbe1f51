// The inbox page: on live events, fetch the conversation list again (one fetch at a time) and swap it in. A page showing older conversations only says that there is new activity.
(function () {
  "use strict";
  var list = document.getElementById("conversations");
  if (!list) {
    return;
  }
  var timer = null;
  var inFlight = false;
  var again = false;

  function refresh() {
    timer = null;
    if (inFlight) {
      again = true;
      return;
    }
    inFlight = true;
    window.Parley.getHTML(list.dataset.src)
      .then(function (html) {
        list.replaceChildren(window.Parley.fragment(html));
        list.dataset.refreshed = String(Date.now());
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

  // At once when idle; while a fetch is out, events only ask for one more after it (a burst of events
  // costs two fetches, not one each).
  function schedule() {
    if (timer === null) {
      timer = window.setTimeout(refresh, 0);
    }
  }

  document.addEventListener("parley:event", function (event) {
    var type = event.detail.type;
    // message.*, messages.* (a campaign's batch) and conversation.*: the list may have changed.
    if (type.indexOf("message") !== 0 && type.indexOf("conversation.") !== 0) {
      return;
    }
    if (list.dataset.paged) {
      if (!document.getElementById("new-activity")) {
        var note = document.createElement("p");
        note.id = "new-activity";
        note.className = "flash flash-success";
        note.setAttribute("role", "status");
        var link = document.createElement("a");
        link.href = "/inbox";
        link.textContent = "New activity: show the newest conversations";
        note.appendChild(link);
        list.parentNode.insertBefore(note, list);
      }
      return;
    }
    schedule();
  });
})();
