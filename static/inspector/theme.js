// The theme a person chose in the top bar (System, Light or Dark), kept in this browser. This file
// loads synchronously in <head>, so <html> has its data-theme before the first paint; "system"
// leaves the choice to prefers-color-scheme (app.css: color-scheme and light-dark()).
(function () {
  "use strict";
  var KEY = "inspector.theme";
  var THEMES = ["system", "light", "dark"];

  function stored() {
    try {
      var theme = window.localStorage.getItem(KEY);
      return THEMES.indexOf(theme) >= 0 ? theme : "system";
    } catch (error) {
      return "system"; // storage refused (a private window): the default
    }
  }

  function show(theme) {
    document.documentElement.dataset.theme = theme;
    document.querySelectorAll("select[data-theme-switch]").forEach(function (select) {
      select.value = theme;
    });
  }

  show(stored());
  document.addEventListener("DOMContentLoaded", function () {
    show(stored());
  });
  // The switch comes again with a body htmx puts in place (Connect swaps in the session page).
  document.addEventListener("htmx:load", function (event) {
    if (event.target.querySelector && event.target.querySelector("select[data-theme-switch]")) {
      show(stored());
    }
  });
  // A choice made in another tab applies here too.
  window.addEventListener("storage", function (event) {
    if (event.key === KEY) {
      show(stored());
    }
  });

  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!select.matches || !select.matches("select[data-theme-switch]")) {
      return;
    }
    var theme = THEMES.indexOf(select.value) >= 0 ? select.value : "system";
    try {
      window.localStorage.setItem(KEY, theme);
    } catch (error) {
      // not kept across pages, still switched here
    }
    show(theme);
  });
})();
