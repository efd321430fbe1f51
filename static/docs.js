// /docs: the OpenAPI document rendered by the vendored Redoc (static/vendor/redoc/, MIT).
// The theme's colours meet WCAG AA contrast (4.5:1) on the tinted backgrounds Redoc derives from them: its
// defaults (green 200s, red 4xx, amber 3xx, grey type names) were 4.2-4.3:1 (issue 36 §16, axe-core).
var THEME = {colors: {success: {main: "#17661f"}, error: {main: "#b3120f"}, warning: {main: "#ffa500", dark: "#7a4e00"},
                      text: {secondary: "#595959"}}};

// Redoc's headings skip levels (an operation's h2 is followed by h5 "Authorizations:" and "Request Body
// schema"): each heading that skips is announced one level below the one before it (aria-level), so a
// screen reader's outline has no gaps. Rerun whenever Redoc renders more (an expanded response, a tab).
function levelHeadings(root) {
  var previous = 1;
  root.querySelectorAll("h1, h2, h3, h4, h5, h6").forEach(function (heading) {
    var level = Number(heading.tagName[1]);
    if (level > previous + 1) {
      level = previous + 1;
      heading.setAttribute("role", "heading");
      heading.setAttribute("aria-level", String(level));
    } else {
      heading.removeAttribute("role");
      heading.removeAttribute("aria-level");
    }
    previous = level;
  });
}

document.addEventListener("DOMContentLoaded", function () {
  var target = document.getElementById("redoc");
  var pending = false;
  new MutationObserver(function () {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; levelHeadings(document); });
  }).observe(target, {childList: true, subtree: true});
  Redoc.init(target.dataset.spec, {scrollYOffset: ".topbar", hideHostname: false, expandResponses: "200,201",
                                   theme: THEME}, target);
});
