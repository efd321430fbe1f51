// A conversation thread: new messages are appended, changed ones (delivery status, the bot's outcome)
// replaced, the bot banner refreshed, all from live events; the reply, Retry and Resume bot forms post
// without leaving the page (their results arrive as events too).
(function () {
  "use strict";
  var body = document.body;
  var contact = body.dataset.contact;
  var list = document.getElementById("messages");
  if (!contact || !list) {
    return;
  }
  var newest = body.dataset.newest || "";
  var appending = false;
  var appendAgain = false;
  var changedWhileAppending = {};  // ids whose change came before the append that brings them

  var get = window.Parley.getHTML;

  function post(form, submitter) {  // submitter: the clicked button, whose name=value the form data carries
    return window.fetch(form.getAttribute("action"), {  // not form.action: a field named action shadows it
      method: "POST", credentials: "same-origin",
      headers: {Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded"},
      body: new URLSearchParams(new FormData(form, submitter || null))
    }).then(function (response) {
      if (response.ok) {
        return null;
      }
      return response.json().then(function (answer) {
        throw new Error(answer.error.message);
      }, function () {
        throw new Error("The server answered " + response.status + ".");
      });
    });
  }

  function xsrf() {
    return document.querySelector("#reply input[name=_xsrf]").value;
  }

  function markRead() {
    var data = new URLSearchParams({_xsrf: xsrf(), through: newest});
    window.fetch("/inbox/" + contact + "/read", {
      method: "POST", credentials: "same-origin", body: data,
      headers: {Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded"}
    }).catch(function () {});
  }

  function scrollToEnd() {
    var last = list.lastElementChild;
    if (last) {
      last.scrollIntoView({block: "end"});
    }
  }

  // Everything after the newest message shown, in order; one fetch at a time.
  function appendNew() {
    if (appending) {
      appendAgain = true;
      return;
    }
    appending = true;
    get("/inbox/" + contact + "/messages?after=" + encodeURIComponent(newest))
      .then(function (html) {
        var nodes = window.Parley.fragment(html);
        Array.prototype.slice.call(nodes.children).forEach(function (item) {
          if (!document.getElementById(item.id)) {
            list.appendChild(item);
          }
          if (item.dataset.id > newest) {
            newest = item.dataset.id;
          }
        });
        var empty = document.getElementById("no-messages");
        if (empty) {
          empty.remove();
        }
        scrollToEnd();
        markRead();
      })
      .catch(function () {})
      .finally(function () {
        appending = false;
        // The append may have been rendered before that change: fetch those messages again.
        var changed = Object.keys(changedWhileAppending);
        changedWhileAppending = {};
        changed.forEach(replaceMessage);
        if (appendAgain) {
          appendAgain = false;
          appendNew();
        }
      });
  }

  function replaceMessage(id) {
    if (!document.getElementById("m-" + id)) {
      if (appending) {
        changedWhileAppending[id] = true;
      }
      return;
    }
    get("/inbox/" + contact + "/messages/" + id).then(function (html) {
      var item = window.Parley.fragment(html).firstElementChild;
      var current = document.getElementById("m-" + id);
      if (item && current) {
        current.replaceWith(item);
      }
    }).catch(function () {});
  }

  function refreshState() {
    get("/inbox/" + contact + "/state").then(function (html) {
      document.getElementById("conversation-state").replaceChildren(window.Parley.fragment(html));
    }).catch(function () {});
  }

  function refreshBotState() {
    get("/inbox/" + contact + "/bot").then(function (html) {
      document.getElementById("bot-state").replaceChildren(window.Parley.fragment(html));
    }).catch(function () {});
  }

  // A campaign's batch events name many contacts: act on the part that is this thread's.
  function batchPart(type, data) {
    if (type === "messages.created" && !body.dataset.static && (data.contactIds || []).indexOf(contact) >= 0) {
      appendNew();
    } else if (type === "messages.status") {
      (data.messages || []).forEach(function (pair) {
        if (pair[0] === contact) {
          replaceMessage(pair[1]);
        }
      });
    }
  }

  document.addEventListener("parley:event", function (event) {
    var data = event.detail.data || {};
    var type = event.detail.type;
    if (type.indexOf("messages.") === 0) {
      batchPart(type, data);
      return;
    }
    if (data.contactId !== contact) {
      return;
    }
    if (type === "message.created" || type === "conversation.sla_breached") {
      // an inbound message reopens a resolved or snoozed conversation and may start the SLA's wait, a person's
      // reply ends it, a breach turns its badge
      refreshState();
    }
    if (type === "message.created" && !body.dataset.static) {
      appendNew();
    } else if (type === "message.status" || type === "message.updated") {
      replaceMessage(data.messageId);
    } else if (type === "conversation.updated") {
      refreshBotState();
      refreshState();
    } else if (type === "conversation.erased") {
      window.location.assign("/inbox");  // the contact and its messages are gone
    }
  });

  // Who else of the account has this thread open (the hub's presence frames, static/live.js).
  var presence = document.getElementById("presence");
  document.addEventListener("parley:presence", function (event) {
    var viewers = event.detail.contactId === contact ? event.detail.viewers || [] : [];
    presence.textContent = viewers.length ? viewers.join(", ") + (viewers.length > 1 ? " are" : " is") + " viewing" : "";
    presence.hidden = !viewers.length;
  });

  // Typing, both ways (services/typing.py): a widget visitor's shows under the messages until it expires or
  // their message comes; the agent's own, at most one signal per 2 s, goes to the visitor of a web conversation.
  var typing = document.getElementById("typing");
  var typingTimer = null;
  function stopTyping() {
    typing.hidden = true;
    window.clearTimeout(typingTimer);
  }
  document.addEventListener("parley:typing", function (event) {
    if (event.detail.contactId !== contact) {
      return;
    }
    typing.textContent = "Visitor is typing…";
    typing.hidden = false;
    window.clearTimeout(typingTimer);
    typingTimer = window.setTimeout(stopTyping, (event.detail.expiresIn || 5) * 1000);
  });
  document.addEventListener("parley:event", function (event) {
    if (event.detail.type === "message.created" && (event.detail.data || {}).contactId === contact) {
      stopTyping();
    }
  });
  var lastTyped = 0;
  var replyBox = document.getElementById("reply-body");
  if (replyBox && replyBox.dataset.web) {
    replyBox.addEventListener("input", function () {
      var live = window.Parley.live;
      if (Date.now() - lastTyped >= 2000 && live && live.send) {
        lastTyped = Date.now();
        live.send({type: "typing", contactId: contact});
      }
    });
  }

  // An error's text; the API's "set it with PATCH /v1/account/settings" becomes a link to the Settings field
  // (as handlers/ui/text.py's ui_text does for server-rendered pages).
  function showError(element, message) {
    var apiHint = "set it with PATCH /v1/account/settings";
    var at = message.indexOf(apiHint);
    if (at < 0) {
      element.textContent = message;
      return;
    }
    var link = document.createElement("a");
    link.href = "/settings#custom-channel-webhook";
    link.textContent = "Settings";
    element.replaceChildren(message.slice(0, at) + "set it in ", link, message.slice(at + apiHint.length));
  }

  var reply = document.getElementById("reply");
  var replyError = document.getElementById("reply-error");
  reply.addEventListener("submit", function (event) {
    event.preventDefault();
    var button = reply.querySelector("button[type=submit]");
    button.disabled = true;
    replyError.hidden = true;
    post(reply).then(function () {
      reply.querySelector("textarea").value = "";
      lastTyped = 0;  // the next keystroke starts a new reply: shown at once
    }).catch(function (error) {
      showError(replyError, error.message);
      replyError.hidden = false;
    }).finally(function () {
      button.disabled = false;
    });
  });

  // Retry, Resume bot and the status and assignee actions: posted in place; the live events bring the new state.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.classList.contains("retry") && !form.classList.contains("resume-bot") &&
        !form.classList.contains("state-action")) {
      return;
    }
    event.preventDefault();
    window.Parley.setUtcOffset(form);
    var button = form.querySelector("button");
    var shown = form.parentNode.querySelector(".form-error");
    if (shown) {
      shown.remove();
    }
    var request = post(form, event.submitter);  // the form's data first: a disabled button's value is left out
    button.disabled = true;
    request.then(function () {
      if (form.classList.contains("state-action")) {
        button.disabled = false;  // a change that changed nothing brings no event to replace the form
      }
    }).catch(function (error) {
      button.disabled = false;
      var note = document.createElement("p");
      note.className = "form-error";
      note.setAttribute("role", "alert");
      showError(note, error.message);
      form.after(note);
    });
  });

  scrollToEnd();
})();
