// Private notes in a thread: the reply box's Reply / Note toggle (in Note mode the form posts to
// /inbox/{contact}/notes, which thread.js's submit handler does through form.action, and looks different),
// notes written on other pages inserted in time order when note.created arrives, removed on note.deleted,
// and "Delete note" posted in place.
(function () {
  "use strict";
  var body = document.body;
  var contact = body.dataset.contact;
  var form = document.getElementById("reply");
  var modes = document.getElementById("compose-mode");
  var list = document.getElementById("messages");
  if (!contact || !form || !modes || !list) {
    return;
  }
  var replyAction = form.getAttribute("action");
  var label = form.querySelector("label[for=reply-body]");
  var hint = document.getElementById("reply-hint");
  var button = form.querySelector("button[type=submit]");
  var texts = {
    reply: [label.textContent, hint.textContent, button.textContent],
    note: ["Private note (only your team sees it)",
           "Never sent to the contact and never in the reply webhook: your team sees it in this thread.",
           "Add note"]
  };

  function setMode(mode) {
    var note = mode === "note";
    form.setAttribute("action", note ? modes.dataset.noteAction : replyAction);
    form.classList.toggle("note-mode", note);
    document.getElementById("mode-reply").setAttribute("aria-pressed", String(!note));
    document.getElementById("mode-note").setAttribute("aria-pressed", String(note));
    label.textContent = texts[mode][0];
    hint.textContent = texts[mode][1];
    button.textContent = texts[mode][2];
  }

  modes.hidden = false;
  document.getElementById("mode-reply").addEventListener("click", function () { setMode("reply"); });
  document.getElementById("mode-note").addEventListener("click", function () {
    setMode("note");
    document.getElementById("reply-body").focus();
  });

  // Messages and notes sort together by the time-ordered part of their ids (msg_…, note_…).
  function key(item) {
    return (item.dataset.id || item.dataset.key || "").split("_")[1] || "";
  }

  function insertNote(item) {
    if (document.getElementById(item.id)) {
      return;
    }
    var at = key(item);
    for (var i = list.children.length - 1; i >= 0; i--) {
      if (key(list.children[i]) <= at) {
        list.children[i].after(item);
        return;
      }
    }
    list.prepend(item);
  }

  document.addEventListener("parley:event", function (event) {
    var data = event.detail.data || {};
    if (data.contactId !== contact) {
      return;
    }
    if (event.detail.type === "note.created" && !body.dataset.static) {  // an older page shows no new notes
      window.Parley.getHTML("/inbox/" + contact + "/notes/" + data.noteId).then(function (html) {
        var item = window.Parley.fragment(html).firstElementChild;
        if (item) {
          insertNote(item);
          item.scrollIntoView({block: "nearest"});
        }
      }).catch(function () {});
    } else if (event.detail.type === "note.deleted") {
      var shown = document.getElementById("n-" + data.noteId);
      if (shown) {
        shown.remove();
      }
    }
  });

  document.addEventListener("submit", function (event) {
    var target = event.target;
    if (!target.classList.contains("delete-note")) {
      return;
    }
    event.preventDefault();
    window.fetch(target.action, {
      method: "POST", credentials: "same-origin", body: new URLSearchParams(new FormData(target)),
      headers: {Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded"}
    }).then(function (response) {
      var item = target.closest("li");
      if (response.ok && item) {
        item.remove();
      }
    }).catch(function () {});
  });
})();
