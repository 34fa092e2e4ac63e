// The time column's switch: relative to the session's start, or the clock. The server renders both
// in every row; a class on <html> picks one, so rows that arrive later follow it with no work here.
(function () {
  "use strict";
  var KEY = "inspector.timeline.time";
  var MODES = ["rel", "abs"];

  function stored() {
    try {
      var mode = window.localStorage.getItem(KEY);
      return MODES.indexOf(mode) >= 0 ? mode : "rel";
    } catch (error) {
      return "rel"; // storage refused (a private window): the default
    }
  }

  function show(mode) {
    document.documentElement.dataset.time = mode;
    document.querySelectorAll("[data-time-mode]").forEach(function (button) {
      button.setAttribute("aria-pressed", button.dataset.timeMode === mode ? "true" : "false");
    });
  }

  show(stored());
  // The switch's buttons arrive with the page, or with a page htmx put in place (after Connect).
  htmx.onLoad(function (elt) {
    if (elt.querySelector && elt.querySelector("[data-time-mode]")) {
      show(stored());
    }
  });

  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-time-mode]");
    if (!button) {
      return;
    }
    var mode = button.dataset.timeMode;
    try {
      window.localStorage.setItem(KEY, mode);
    } catch (error) {
      // not kept across pages, still switched here
    }
    show(mode);
  });
})();
