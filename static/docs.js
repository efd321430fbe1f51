// /docs: the OpenAPI document rendered by the vendored Redoc (static/vendor/redoc/, MIT).
document.addEventListener("DOMContentLoaded", function () {
  var target = document.getElementById("redoc");
  Redoc.init(target.dataset.spec, {scrollYOffset: ".topbar", hideHostname: false, expandResponses: "200,201"},
             target);
});
