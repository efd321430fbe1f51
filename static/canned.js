// Canned replies in the reply box: typing /code (a slash at the start of a word, then letters) lists the
// account's canned replies whose code starts with what follows the slash; choosing one (click, Enter or Tab)
// puts its body in place of /code, already rendered for this thread's contact by the server.
(function () {
  "use strict";
  var picker = document.getElementById("canned-picker");
  var box = document.getElementById("reply-body");
  if (!picker || !box) {
    return;
  }
  var MAX_SHOWN = 8;
  var replies = null;  // [{id, code, body}], fetched on the first slash
  var loading = null;
  var matches = [];
  var active = 0;
  var token = null;  // the /code being typed: {start, end, prefix}

  box.setAttribute("aria-controls", "canned-picker");
  box.setAttribute("aria-autocomplete", "list");

  function load() {
    if (!loading) {
      loading = window.fetch(picker.dataset.source, {credentials: "same-origin", headers: {Accept: "application/json"}})
        .then(function (response) {
          if (!response.ok) {
            throw new Error("HTTP " + response.status);
          }
          return response.json();
        })
        .then(function (answer) {
          replies = answer.items;
        })
        .catch(function () {
          loading = null;  // asked again at the next keystroke
        });
    }
    return loading;
  }

  function typedToken() {
    var end = box.selectionStart;
    if (end !== box.selectionEnd) {
      return null;
    }
    var match = /(^|\s)\/([A-Za-z0-9_-]*)$/.exec(box.value.slice(0, end));
    return match ? {start: end - match[2].length - 1, end: end, prefix: match[2].toLowerCase()} : null;
  }

  function close() {
    picker.hidden = true;
    picker.replaceChildren();
    matches = [];
    box.removeAttribute("aria-activedescendant");
  }

  function show() {
    picker.replaceChildren();
    matches.forEach(function (reply, i) {
      var option = document.createElement("li");
      option.id = "canned-option-" + i;
      option.setAttribute("role", "option");
      option.setAttribute("aria-selected", String(i === active));
      option.dataset.index = String(i);
      var code = document.createElement("strong");
      code.textContent = "/" + reply.code;
      var text = document.createElement("span");
      text.textContent = reply.body;
      option.append(code, " ", text);
      picker.appendChild(option);
    });
    picker.hidden = matches.length === 0;
    if (matches.length) {
      box.setAttribute("aria-activedescendant", "canned-option-" + active);
    }
  }

  function update() {
    token = typedToken();
    if (!token) {
      close();
      return;
    }
    load().then(function () {
      if (!replies || !token) {
        return;
      }
      matches = replies.filter(function (reply) {
        return reply.code.toLowerCase().indexOf(token.prefix) === 0;
      }).slice(0, MAX_SHOWN);
      active = 0;
      show();
    });
  }

  function choose(index) {
    var reply = matches[index];
    if (!reply || !token) {
      return;
    }
    box.value = box.value.slice(0, token.start) + reply.body + box.value.slice(token.end);
    var caret = token.start + reply.body.length;
    box.setSelectionRange(caret, caret);
    token = null;
    close();
    box.focus();
  }

  box.addEventListener("input", update);
  box.addEventListener("blur", close);
  box.addEventListener("keydown", function (event) {
    if (picker.hidden || !matches.length) {
      return;
    }
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      active = (active + (event.key === "ArrowDown" ? 1 : matches.length - 1)) % matches.length;
      show();
    } else if (event.key === "Enter" || event.key === "Tab") {
      event.preventDefault();
      choose(active);
    } else if (event.key === "Escape") {
      event.preventDefault();
      close();
    }
  });
  // mousedown, not click: the textarea keeps the focus (its blur would close the list first).
  picker.addEventListener("mousedown", function (event) {
    var option = event.target.closest("[role=option]");
    if (option) {
      event.preventDefault();
      choose(Number(option.dataset.index));
    }
  });
})();
