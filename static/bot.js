// Bot page: "Add a rule" adds an empty rule slot to its form at once (without it, a new slot appeared only
// after saving). The slot copies the last one, numbered on: its fields are rules-N-keywords/-answer, and
// rule_rows says how many the form posts.
(function () {
  "use strict";

  function renumber(node, index) {
    node.querySelectorAll("[id], [for], [name]").forEach(function (el) {
      ["id", "for", "name"].forEach(function (attribute) {
        var value = el.getAttribute(attribute);
        if (value) {
          el.setAttribute(attribute, value.replace(/rules?-\d+-/, function (prefix) {
            return prefix.replace(/\d+/, String(index));
          }));
        }
      });
    });
    node.querySelectorAll("label").forEach(function (label) {
      label.textContent = label.textContent.replace(/^Rule \d+/, "Rule " + (index + 1));
    });
  }

  function addRule(button) {
    var fieldset = button.closest("fieldset");
    var slots = fieldset.querySelectorAll(".rule");
    var last = slots[slots.length - 1];
    var slot = last.cloneNode(true);
    renumber(slot, slots.length);
    slot.querySelectorAll("input, textarea").forEach(function (field) {
      field.value = "";
    });
    last.after(slot);
    fieldset.querySelector("input[name=rule_rows]").value = String(slots.length + 1);
    slot.querySelector("input").focus();
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("button.add-rule").forEach(function (button) {
      button.hidden = false;
      button.addEventListener("click", function () {
        addRule(button);
      });
    });
  });
})();
