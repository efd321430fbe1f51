// The website chat widget's frame (handlers/widget.py ChatFrameHandler): history, sending, live replies over a
// WebSocket (a long-poll when that cannot connect), both resuming from the event stream's cursor.
(function () {
  "use strict";
  var cfg = JSON.parse(document.getElementById("parley-config").textContent);
  var base = "/widget/" + cfg.widgetId;
  var TOKEN = "parley:" + cfg.widgetId + ":token";
  var memory = {};
  function load(k) { try { return localStorage.getItem(k); } catch (e) { return memory[k] || null; } }
  function save(k, v) { try { localStorage.setItem(k, v); } catch (e) { memory[k] = v; } }
  // The token comes from the page's own storage through our URL's fragment (never sent to a server): browsers
  // that block a framed site's storage would otherwise forget the visitor on every page.
  var given = /^#t=([^&]+)/.exec(location.hash);
  if (given) window.history.replaceState(null, "", location.pathname + location.search);
  var token = (given && decodeURIComponent(given[1])) || load(TOKEN), cursor = null, seen = {}, live = null, retry = 0, polling = false, wsFailures = 0;
  var list = document.getElementById("messages"), log = document.getElementById("log");
  var form = document.getElementById("send"), box = document.getElementById("body");
  var status = document.getElementById("status"), honeypot = document.getElementById("website");
  // Typing, both ways over the WebSocket only (none on the long-poll fallback): at most one signal per 2 s.
  var typing = document.getElementById("typing"), typingTimer = null, lastTyped = 0;
  function stopTyping() { typing.hidden = true; clearTimeout(typingTimer); }
  document.documentElement.style.setProperty("--accent", cfg.color);
  // The page that frames us: given by the loader, and only ever one of the widget's allowed origins (the
  // frame-ancestors header already refused the others). Messages go to it alone, never to "*".
  var parentOrigin = new URLSearchParams(location.search).get("origin");
  function tell(data) {
    if (parentOrigin && window.parent !== window) { data.parley = data.parley || "event"; window.parent.postMessage(data, parentOrigin); }
  }
  function keep(t) { token = t; save(TOKEN, t); tell({ parley: "token", token: t }); }
  function call(method, path, body) {
    var headers = { "Content-Type": "application/json" };
    if (token) headers["X-Parley-Visitor"] = token;
    return fetch(base + path, { method: method, headers: headers, body: body ? JSON.stringify(body) : undefined })
      .then(function (r) {
        return r.json().then(function (j) {
          if (!r.ok) { var e = new Error((j.error && j.error.message) || "Something went wrong"); e.status = r.status; throw e; }
          return j;
        });
      });
  }
  // The CSAT question (services/csat.py) waiting for this visitor's answer: its message gets rating buttons 1-5 and
  // an optional comment, sent to POST /csat. One asked while the chat is open (a live message) is open too.
  var openAsk = null;
  function rate(li) {
    var f = document.createElement("form"), row = document.createElement("div"), picked = 0, buttons = [];
    f.className = "csat";
    row.className = "stars"; row.setAttribute("role", "group");
    row.setAttribute("aria-label", "Your rating, from 1 (bad) to 5 (very good)");
    [1, 2, 3, 4, 5].forEach(function (n) {
      var b = document.createElement("button");
      b.type = "button"; b.textContent = n; b.setAttribute("aria-pressed", "false");
      b.setAttribute("aria-label", "Rate " + n + " of 5");
      b.addEventListener("click", function () {
        picked = n;
        buttons.forEach(function (x, i) { x.setAttribute("aria-pressed", String(i + 1 === n)); });
      });
      buttons.push(b); row.appendChild(b);
    });
    var comment = document.createElement("textarea"), send = document.createElement("button");
    comment.maxLength = 1000; comment.rows = 2; comment.placeholder = "A comment (optional)";
    comment.setAttribute("aria-label", "A comment (optional)");
    send.type = "submit"; send.textContent = "Send rating";
    f.appendChild(row); f.appendChild(comment); f.appendChild(send);
    f.addEventListener("submit", function (e) {
      e.preventDefault();
      if (!picked) { status.textContent = "Choose a rating from 1 to 5."; return; }
      call("POST", "/csat", { rating: picked, comment: comment.value.trim() || null }).then(function () {
        var done = document.createElement("p");
        status.textContent = ""; openAsk = null;
        done.className = "csat-done"; done.textContent = "Thank you for your answer!";
        f.replaceWith(done);
      }, function (err) { status.textContent = err.message; });
    });
    li.appendChild(f);
  }
  function show(m, quiet) {
    if (seen[m.id]) return;
    seen[m.id] = 1;
    var li = document.createElement("li"), t = document.createElement("time");
    li.className = m.mine ? "mine" : "theirs";
    if (m.media && /^image\//.test(m.media.contentType)) {
      var img = document.createElement("img");
      img.src = m.media.url; img.alt = "Attached image";
      li.appendChild(img);
    } else if (m.media) {
      var a = document.createElement("a");
      a.href = m.media.url; a.target = "_blank"; a.rel = "noopener"; a.textContent = "Open the attachment";
      li.appendChild(a); li.appendChild(document.createElement("br"));
    }
    li.appendChild(document.createTextNode(m.body));
    if (m.csat && !m.mine && (!quiet || m.id === openAsk)) rate(li);
    t.dateTime = m.createdAt;
    t.textContent = new Date(m.createdAt).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    li.appendChild(t);
    list.appendChild(li);
    if (!m.mine) stopTyping();
    log.scrollTop = log.scrollHeight;
    if (!m.mine && !quiet) tell({ parley: "message", message: { id: m.id, body: m.body, createdAt: m.createdAt } });
  }
  // Outside business hours: when we reply, and an optional email to answer at (POST /email).
  var away = document.getElementById("away"), awayForm = document.getElementById("away-email");
  function hours(h) {
    away.hidden = h.openNow;
    document.getElementById("away-line").textContent = "We're away. " +
      (h.replyFrom ? "We reply from " + h.replyFrom + "." : "We'll reply as soon as we can.");
  }
  awayForm.addEventListener("submit", function (e) {
    e.preventDefault();
    var field = document.getElementById("email");
    call("POST", "/email", { email: field.value }).then(function (a) {
      keep(a.token);
      status.textContent = "";
      awayForm.hidden = true;
      document.getElementById("away-line").textContent += " Thanks: we'll answer at " + a.email + ".";
    }, function (err) { status.textContent = err.message; });
  });
  function readHistory() {
    return call("GET", "/messages").then(function (h) {
      cursor = h.cursor;
      openAsk = h.csat && h.csat.messageId;
      hours(h);
      h.messages.forEach(function (m) { show(m, true); });
      if (h.messages.length) tell({ parley: "active" });
      if (token) follow();
    });
  }
  function follow() {
    if (live || polling || !token) return;
    if (wsFailures >= 2 || !window.WebSocket) return poll();
    var opened = false;
    live = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + base + "/live?after=" + encodeURIComponent(cursor));
    live.onopen = function () { opened = true; retry = 0; live.send(JSON.stringify({ token: token })); };
    live.onmessage = function (e) {
      var d = JSON.parse(e.data);
      if (d.type === "messages") { cursor = d.cursor; d.messages.forEach(function (m) { show(m); }); }
      else if (d.type === "typing") { typing.textContent = "An agent is typing…"; typing.hidden = false; clearTimeout(typingTimer); typingTimer = setTimeout(stopTyping, (d.expiresIn || 5) * 1000); }
    };
    live.onclose = function () {
      live = null;
      if (!opened) wsFailures++;
      retry = Math.min(retry * 2 || 1000, 30000);
      setTimeout(follow, retry);
    };
  }
  function poll() {
    polling = true;
    call("GET", "/updates?wait=25&after=" + encodeURIComponent(cursor)).then(function (u) {
      cursor = u.cursor;
      u.messages.forEach(function (m) { show(m); });
      retry = 0;
      setTimeout(poll, 0);
    }, function () {
      retry = Math.min(retry * 2 || 1000, 30000);
      setTimeout(poll, retry);
    });
  }
  var file = document.getElementById("file"), MAX_FILE = 5 * 1024 * 1024;
  function attached() {
    var f = file.files && file.files[0];
    if (!f) return Promise.resolve(null);
    if (f.size > MAX_FILE) return Promise.reject(new Error("That file is over 5 MB: attach a smaller one."));
    return new Promise(function (resolve, reject) {
      var reader = new FileReader();
      reader.onload = function () { resolve({ url: reader.result, type: f.type, name: f.name }); };
      reader.onerror = function () { reject(new Error("That file could not be read.")); };
      reader.readAsDataURL(f);
    });
  }
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var text = box.value;
    if (!text.trim() && !(file.files && file.files.length)) return;
    status.textContent = "";
    attached().then(function (f) {
      var message = { body: text.trim() ? text : f.name, website: honeypot.value || null };
      if (f) { message.mediaUrl = f.url; message.mediaContentType = f.type; }
      return call("POST", "/messages", message);
    }).then(function (a) {
      box.value = ""; file.value = ""; lastTyped = 0;
      if (a.token && a.token !== token) keep(a.token);
      if (a.message) show(a.message);
      tell({ parley: "active" });
      follow();
    }, function (err) { status.textContent = err.message; });
  });
  box.addEventListener("input", function () {
    if (live && live.readyState === 1 && Date.now() - lastTyped >= 2000) { lastTyped = Date.now(); live.send(JSON.stringify({ type: "typing" })); }
  });
  box.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); form.requestSubmit(); }
  });
  document.getElementById("close").addEventListener("click", function () { tell({ parley: "close" }); });
  window.addEventListener("message", function (e) {
    if (e.origin !== parentOrigin || e.source !== window.parent) return;
    var d = e.data || {};
    if (d.parley === "identify") {
      call("POST", "/identify", { id: String(d.id), hash: String(d.hash || ""), email: d.email || null, name: d.name || null })
        .then(function (a) {
          if (a.verified && a.token !== token) {
            keep(a.token);
            list.textContent = ""; seen = {};
            if (live) { live.onclose = null; live.close(); live = null; }
            readHistory();
          }
          tell({ parley: "identified", verified: a.verified });
        }, function (err) { status.textContent = err.message; });
    } else if (d.parley === "open") {
      box.focus();
    }
  });
  function ready() { tell({ parley: "ready", color: cfg.color }); }
  readHistory().then(ready, function (err) { status.textContent = err.message; ready(); });
})();
