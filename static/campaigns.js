// The Campaigns pages, live: a campaign.progress event carries the campaign's status and counts as its
// transaction left them, and they are written into the page as they are (no fetch per message). What else
// depends on them is fetched again, at most once every REFETCH_MS: the campaign page's summary (buttons, paused
// reason, times) when the status changes or a count becomes or stops being zero, its recipients table when
// counts move, and the list's first page when a campaign newer than those it shows appears.
// A draft's schedule form sends the local start time typed as UTC (startAtUtc); sending and cancelling ask first.
(function () {
  "use strict";
  var REFETCH_MS = 500;
  var body = document.body;
  var labels = JSON.parse(body.dataset.statusLabels || "{}");
  var latest = {};  // campaign id -> the newest event data applied (re-applied over a fetched fragment)
  var shapes = {};  // campaign id -> status and which counts are zero: the summary is fetched when it changes

  // A fragment fetched again, then the newest counts known written over it (it may have been read before the
  // last event committed).
  function refresher(element) {
    return window.Parley.refresher(element, REFETCH_MS, function () {
      Object.keys(latest).forEach(function (id) {
        apply(latest[id]);
      });
    });
  }

  function shape(status, counts) {
    return status + ":" + Object.keys(counts).sort().map(function (name) {
      return counts[name] > 0 ? "1" : "0";
    }).join("");
  }

  // Write a campaign's status and counts into every element of the page that shows them.
  function apply(data) {
    var counts = data.counts;
    var done = counts.sent + counts.failed + counts.skipped + counts.cancelled;
    var percent = counts.total ? Math.floor(done * 100 / counts.total) : 0;
    document.querySelectorAll('[data-campaign="' + data.campaignId + '"]').forEach(function (root) {
      root.dataset.status = data.status;
      root.querySelectorAll("[data-count]").forEach(function (el) {
        if (el.dataset.count in counts) {
          el.textContent = String(counts[el.dataset.count]);
        }
      });
      root.querySelectorAll("[data-field=status]").forEach(function (el) {
        el.textContent = labels[data.status] || data.status;
      });
      root.querySelectorAll("[data-field=done]").forEach(function (el) {
        el.textContent = String(done);
      });
      root.querySelectorAll("[data-field=percent]").forEach(function (el) {
        el.textContent = String(percent);
      });
      root.querySelectorAll("progress").forEach(function (el) {
        el.max = Math.max(counts.total, 1);
        el.value = done;
        el.textContent = percent + " %";
      });
    });
  }

  var rows = document.getElementById("campaign-rows");        // the list page
  var campaign = document.getElementById("campaign");         // a campaign's page
  var refreshRows = rows && !rows.dataset.paged ? refresher(rows) : null;
  var refreshSummary = campaign ? refresher(document.getElementById("campaign-summary")) : null;
  var refreshRecipients = campaign ? refresher(document.getElementById("recipient-rows")) : null;
  if (campaign) {
    shapes[campaign.dataset.campaign] = shape(campaign.dataset.status, JSON.parse(campaign.dataset.counts));
  }

  document.addEventListener("parley:event", function (event) {
    if (event.detail.type !== "campaign.progress") {
      return;
    }
    var data = event.detail.data;
    if (campaign) {
      if (data.campaignId !== campaign.dataset.campaign) {
        return;
      }
      latest[data.campaignId] = data;
      apply(data);
      var now = shape(data.status, data.counts);
      if (now !== shapes[data.campaignId]) {
        shapes[data.campaignId] = now;
        refreshSummary();
      }
      var before = document.getElementById("before-sending");
      if (before && data.status !== "draft" && data.status !== "scheduled") {
        before.remove();  // started (or cancelled) elsewhere: nothing left to preview, test or send
      }
      refreshRecipients();
    } else if (rows) {
      latest[data.campaignId] = data;
      var newest = rows.querySelector("[data-campaign]");
      if (document.querySelector('[data-campaign="' + data.campaignId + '"]')) {
        apply(data);
      } else if (refreshRows && (!newest || data.campaignId > newest.dataset.campaign)) {
        refreshRows();  // a new campaign (ids sort by creation); an older one than the page shows is not here
      }
    }
  });

  // A start time typed is the browser's local time; the server gets it in UTC (startAtUtc).
  document.querySelectorAll("form").forEach(function (form) {
    if (form.elements.startAt && form.elements.startAtUtc) {
      form.addEventListener("submit", function () {
        var typed = form.elements.startAt.value;
        var when = typed ? new Date(typed) : null;
        form.elements.startAtUtc.value = when && !isNaN(when) ? when.toISOString() : "";
      });
    }
  });

  // Sending and cancelling cannot be undone: ask first.
  document.addEventListener("submit", function (event) {
    var button = event.submitter;
    if (button && button.dataset.confirm && !window.confirm(button.dataset.confirm)) {
      event.preventDefault();
    }
  });
})();
