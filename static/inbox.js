// The inbox page: on live events, fetch the conversation list again (Parley.refresher: one fetch at a time) and
// swap it in. A page showing older conversations only says that there is new activity.
(function () {
  "use strict";
  var list = document.getElementById("conversations");
  if (!list) {
    return;
  }
  // The tabs' counts come with each refreshed list (the fragment's #view-counts).
  function showCounts() {
    var holder = document.getElementById("view-counts");
    if (!holder) {
      return;
    }
    var counts = JSON.parse(holder.dataset.counts);
    document.querySelectorAll(".tabs a[data-view]").forEach(function (tab) {
      tab.querySelector(".count").textContent = String(counts[tab.dataset.view]);
    });
  }
  var schedule = window.Parley.refresher(list, 0, showCounts);  // at once when idle; one more after a fetch that is out

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
