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
  // Ticked conversations stay ticked across live refreshes (the list is replaced whole).
  var ticked = {};
  list.addEventListener("change", function (event) {
    if (event.target.classList.contains("pick")) {
      if (event.target.checked) {
        ticked[event.target.value] = true;
      } else {
        delete ticked[event.target.value];
      }
      showTicked();
    }
  });
  function showTicked() {
    var count = Object.keys(ticked).length;
    document.getElementById("bulk-count").textContent = count ? count + " selected:" : "Tick conversations, then";
  }
  function restoreTicks() {
    list.querySelectorAll("input.pick").forEach(function (box) {
      box.checked = !!ticked[box.value];
    });
  }

  // The bulk bar posts in place: the live events move the rows; ticks of rows that left the view still count.
  var bulk = document.getElementById("bulk");
  bulk.addEventListener("submit", function (event) {
    event.preventDefault();
    window.Parley.setUtcOffset(bulk);
    var data = new URLSearchParams(new FormData(bulk));
    data.delete("contact");
    Object.keys(ticked).forEach(function (id) {
      data.append("contact", id);
    });
    var button = bulk.querySelector("button");
    button.disabled = true;
    var error = document.getElementById("bulk-error");
    window.fetch(bulk.getAttribute("action"), {  // its field "action" shadows bulk.action
      method: "POST", credentials: "same-origin", body: data,
      headers: {Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded"}
    }).then(function (response) {
      if (response.ok) {
        ticked = {};
        restoreTicks();
        showTicked();
        error.hidden = true;
        return null;
      }
      return response.json().then(function (answer) {
        error.textContent = answer.error.message;
        error.hidden = false;
      });
    }).catch(function () {
      error.textContent = "The change could not be sent; try again.";
      error.hidden = false;
    }).finally(function () {
      button.disabled = false;
    });
  });

  var schedule = window.Parley.refresher(list, 0, function () {  // at once when idle; one more after a fetch that is out
    showCounts();
    restoreTicks();
  });

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
