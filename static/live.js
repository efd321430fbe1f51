// Parley live updates: one WebSocket per signed-in page to /ws (session cookie, same origin), resumed from the
// last event id it saw after a drop or a server restart. Pages listen for "parley:event" on document.
// Frames: {"type":"events","events":[{id,type,data,at}]}, {"type":"ready"}, {"type":"reload","reason"},
// {"type":"counts","needsPerson","unread"} (the navigation's counts, pushed: "parley:counts"),
// {"type":"presence","contactId","viewers":[...]} (who else views the thread this page says it shows: a thread
// page sends {"type":"viewing","contactId"} once live; pages listen for "parley:presence"),
// {"type":"typing","contactId","who":"visitor","expiresIn":5} (a widget visitor types in the thread the page views:
// "parley:typing"); a thread page sends {"type":"typing","contactId"} while its agent types (Parley.live.send).
// A page without live events (no data-live-after) opens the socket for the counts alone (/ws?counts=1).
// Needs parley.js (loaded by every page).
(function () {
  "use strict";

  var after = document.body.dataset.liveAfter;
  var status = document.getElementById("live-status");
  var countsOnly = after === undefined || !status;
  if (countsOnly && !document.getElementById("needs-person")) {
    return;
  }
  var live = {lastEventId: Number(after || 0), state: "connecting", events: 0, countsOnly: countsOnly,
              counts: null, connections: 0};
  window.Parley.live = live;
  var delay = 500;
  var failures = 0;
  var finished = false;

  function show(state, text) {
    live.state = state;
    if (status) {
      status.dataset.state = state;
      status.querySelector(".text").textContent = text;
    }
  }

  function reload() {
    finished = true;
    show("reloading", "Reloading to catch up…");
    window.location.reload();
  }

  function connect() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var query = countsOnly ? "counts=1" : "after=" + live.lastEventId;
    var socket = new WebSocket(scheme + window.location.host + "/ws?" + query);
    live.connections += 1;
    live.send = function (data) {  // ephemeral messages (typing): dropped while not connected
      if (socket.readyState === 1) {
        socket.send(JSON.stringify(data));
      }
    };
    socket.onmessage = function (message) {
      var frame = JSON.parse(message.data);
      if (frame.type === "events") {
        frame.events.forEach(function (event) {
          if (event.id > live.lastEventId) {  // never twice, even across a resume
            live.lastEventId = event.id;
            live.events += 1;
            document.dispatchEvent(new CustomEvent("parley:event", {detail: event}));
          }
        });
      } else if (frame.type === "ready") {
        delay = 500;
        failures = 0;
        show("live", "Live");
        if (document.body.dataset.contact) {
          socket.send(JSON.stringify({type: "viewing", contactId: document.body.dataset.contact}));
        }
      } else if (frame.type === "counts") {
        live.counts = frame;
        document.dispatchEvent(new CustomEvent("parley:counts", {detail: frame}));
      } else if (frame.type === "presence") {
        document.dispatchEvent(new CustomEvent("parley:presence", {detail: frame}));
      } else if (frame.type === "typing") {
        document.dispatchEvent(new CustomEvent("parley:typing", {detail: frame}));
      } else if (frame.type === "reload") {
        reload();
      }
    };
    socket.onclose = function (event) {
      if (finished) {
        return;
      }
      if (event.code === 4001) {  // signed out: the reload shows the sign-in page
        reload();
        return;
      }
      if (event.code === 4002) {  // newer pages of this session took the live slots: no reconnect race
        finished = true;
        show("offline", "Not live: too many open pages (reload this one to make it live again)");
        return;
      }
      failures += 1;
      show("offline", "Offline: reconnecting…");
      if (failures >= 3) {
        checkSession();
      }
      window.setTimeout(connect, delay * (1 + Math.random() / 2));
      delay = Math.min(delay * 2, 15000);
    };
  }

  // A refused handshake looks like any network failure: if the session is gone, go and sign in again.
  function checkSession() {
    window.fetch(window.location.href, {redirect: "manual", headers: {Accept: "text/html"}})
      .then(function (response) {
        if (response.type === "opaqueredirect") {
          reload();
        }
      })
      .catch(function () {});
  }

  // Leaving the page (a link, a form such as "Sign out" or "back to the agency", which may end the session and
  // so close this socket with 4001): the navigation goes on, not a reload of this page.
  window.addEventListener("beforeunload", function () {
    finished = true;
  });
  window.addEventListener("pageshow", function (event) {
    if (event.persisted && finished && live.state !== "reloading") {  // back from the cache: live again
      finished = false;
      connect();
    }
  });

  connect();
})();
