/* Parley's website chat widget loader: <script src="https://PARLEY/widget.js" data-widget="wid_…" async></script>.
   A launcher button in a shadow root (the host page's styles neither reach it nor are touched); the chat
   frame (Parley's origin) is loaded only when the visitor opens it or has a conversation whose replies may come.
   Messages go only to Parley's origin and are taken only from the frame, with addEventListener. */
(function () {
  "use strict";
  var script = document.currentScript;
  if (!script || (window.Parley && window.Parley.version)) return;
  var wid = script.getAttribute("data-widget"), origin = new URL(script.src).origin;
  var ACTIVE = "parley:" + wid + ":active", TOKEN = "parley:" + wid + ":token";
  var host = document.createElement("div"), root = host.attachShadow({ mode: "open" });
  root.innerHTML = "<style>" +
    ":host{all:initial}" +
    "button{position:fixed;right:20px;bottom:20px;z-index:2147483646;width:56px;height:56px;border-radius:50%;border:0;" +
    "background:#2563eb;color:#fff;cursor:pointer;box-shadow:0 2px 12px rgba(0,0,0,.3);display:flex;align-items:center;justify-content:center}" +
    "button:focus-visible{outline:3px solid #000;outline-offset:2px}" +
    "b{position:absolute;top:-2px;right:-2px;width:14px;height:14px;border-radius:50%;background:#d00;border:2px solid #fff}" +
    "div{position:fixed;right:20px;bottom:88px;z-index:2147483647;width:370px;height:560px;max-height:calc(100vh - 108px);" +
    "border-radius:12px;overflow:hidden;box-shadow:0 4px 24px rgba(0,0,0,.3);background:#fff}" +
    "iframe{border:0;width:100%;height:100%}" +
    "[hidden]{display:none}" +
    "@media (max-width:640px){div{inset:0;width:100%;height:100%;max-height:none;border-radius:0}}" +
    "</style><button type=\"button\" aria-label=\"Open chat\" aria-expanded=\"false\">" +
    "<svg width=\"28\" height=\"28\" viewBox=\"0 0 24 24\" aria-hidden=\"true\"><path fill=\"currentColor\" " +
    "d=\"M4 3h16a2 2 0 0 1 2 2v11a2 2 0 0 1-2 2H8l-5 4V5a2 2 0 0 1 1-2z\"/></svg><b hidden></b></button>" +
    "<div hidden></div>";
  var button = root.querySelector("button"), badge = root.querySelector("b"), panel = root.querySelector("div");
  var frame = null, ready = false, queue = [], listeners = { message: [] };
  function remember(key, value) { try { if (value) localStorage.setItem(key, value); else return localStorage.getItem(key); } catch (e) { return null; } }
  function post(data) { if (ready) frame.contentWindow.postMessage(data, origin); else queue.push(data); }
  function load() {
    if (frame) return;
    frame = document.createElement("iframe");
    frame.title = "Chat";
    var token = remember(TOKEN);  // in the fragment: the frame reads it, no server sees it
    frame.src = origin + "/widget/" + encodeURIComponent(wid) + "?origin=" + encodeURIComponent(location.origin) +
      (token ? "#t=" + encodeURIComponent(token) : "");
    panel.appendChild(frame);
  }
  function open() {
    load();
    panel.hidden = false; badge.hidden = true;
    button.setAttribute("aria-expanded", "true"); button.setAttribute("aria-label", "Close chat");
    post({ parley: "open" });
  }
  function close() {
    panel.hidden = true;
    button.setAttribute("aria-expanded", "false"); button.setAttribute("aria-label", "Open chat");
  }
  button.addEventListener("click", function () { if (panel.hidden) open(); else close(); });
  window.addEventListener("message", function (e) {
    if (e.origin !== origin || !frame || e.source !== frame.contentWindow) return;
    var d = e.data || {};
    if (d.parley === "ready") {
      ready = true; queue.splice(0).forEach(post);
      if (/^#[0-9a-f]{6}$/.test(d.color)) button.style.background = d.color;
    }
    else if (d.parley === "active") remember(ACTIVE, "1");
    else if (d.parley === "token" && typeof d.token === "string") remember(TOKEN, d.token);
    else if (d.parley === "close") close();
    else if (d.parley === "message") {
      if (panel.hidden) badge.hidden = false;
      listeners.message.forEach(function (fn) { try { fn(d.message); } catch (err) { setTimeout(function () { throw err; }); } });
    }
  });
  (document.body || document.documentElement).appendChild(host);
  if (remember(ACTIVE)) load();  // a conversation exists: follow it, so a reply shows on the launcher
  window.Parley = {
    version: 1,
    open: open,
    close: close,
    identify: function (who) { load(); post({ parley: "identify", id: who.id, hash: who.hash, email: who.email, name: who.name }); },
    on: function (name, fn) { if (listeners[name] && typeof fn === "function") listeners[name].push(fn); }
  };
})();
