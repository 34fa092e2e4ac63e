// The list panels' first open: the Tools, Resources and Prompts panels render a form that sends their
// list as it loads (htmx, hx-trigger="load"); this keeps the person's "List on open" switch, refuses
// that request before it is sent when the switch is off or the page already sent it. Of the answers that
// redraw the panel, only the newest request's goes in. And a session page rendered while the server was
// still connecting moves to Tools once the server turns out to have tools, unless the person has picked
// a tab.
(function () {
  "use strict";
  var KEY = "inspector.listOnOpen";

  var here = null; // the switch as set on this page, when the browser refuses to keep it

  function listsOnOpen() {
    try {
      var kept = window.localStorage.getItem(KEY);
      if (kept) {
        return kept !== "off";
      }
    } catch (e) {
      // storage refused (a private window's policy): this page's choice, else on, as by default
    }
    return here === null ? true : here;
  }

  function showSwitches() {
    var on = listsOnOpen();
    document.querySelectorAll("[data-list-on-open-switch]").forEach(function (box) {
      box.checked = on;
    });
  }

  // The switches arrive with each list panel.
  htmx.onLoad(function (elt) {
    if (elt.querySelector && elt.querySelector("[data-list-on-open-switch]")) {
      showSwitches();
    }
  });

  document.addEventListener("change", function (event) {
    var box = event.target;
    if (!box.matches || !box.matches("[data-list-on-open-switch]")) {
      return;
    }
    here = box.checked;
    try {
      window.localStorage.setItem(KEY, box.checked ? "on" : "off");
    } catch (e) {
      // nothing to remember it in: it still holds for this page
    }
    showSwitches();
  });

  // Once per page and list: a panel redrawn before its list is stored asks again, and is refused here.
  var asked = {};

  document.addEventListener("htmx:beforeRequest", function (event) {
    var form = event.detail.elt;
    if (!form.matches || !form.matches("form[data-list-on-open]")) {
      return;
    }
    var url = form.getAttribute("hx-post");
    if (!listsOnOpen() || asked[url]) {
      event.preventDefault();
      return;
    }
    asked[url] = true;
  });

  // Of the answers that redraw the panel, only the one to the newest request goes in: an older one (a
  // tab opened, a list asked again, a subscription, then something newer) is out of date. Drawn, it
  // would also redraw the tabs under a newer request's tab still on its way, and htmx looks for an
  // answer's out-of-band parts from the element that asked: one no longer in the page finds none.
  var panelAsked = 0;

  function drawsPanel(target) {
    return target && (target.id === "panel" || (target.parentElement && target.parentElement.id === "panel"));
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    if (drawsPanel(event.detail.target) && event.detail.xhr && !event.defaultPrevented) {
      event.detail.xhr.panelAsked = ++panelAsked;
    }
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var order = event.detail.xhr ? event.detail.xhr.panelAsked : undefined;
    if (drawsPanel(event.detail.target) && order !== undefined && order < panelAsked) {
      event.detail.shouldSwap = false;
    }
  });

  // --- a connecting session opens on Tools once ready ---------------------------------------------

  function toolsWhenReady() {
    var page = document.querySelector(".session[data-tools-when-ready]");
    if (!page || !document.querySelector("#session-state[data-offers-tools]")) {
      return;
    }
    page.removeAttribute("data-tools-when-ready");
    var selected = document.querySelector('#tabs [role="tab"][aria-selected="true"]');
    var tools = document.getElementById("tab-tools");
    var panel = document.getElementById("panel");
    if (tools && panel && selected && selected.id === "tab-overview") {
      // Not the tab's own click: that would add a history entry the person never made, and Back
      // would lead to this page again rather than to where they were.
      htmx.ajax("GET", tools.getAttribute("hx-get"), { source: panel, target: "#panel" });
    }
  }

  // A tab the person picks (a click, or Enter and Space, which click) is theirs: it stays.
  document.addEventListener("click", function (event) {
    var tab = event.target.closest && event.target.closest('#tabs [role="tab"]');
    var page = tab && tab.closest(".session[data-tools-when-ready]");
    if (page) {
      page.removeAttribute("data-tools-when-ready");
    }
  }, true);

  // The tab bar is one line that scrolls: the selected tab is kept in view (a page opened on it, a
  // panel changed by Back, the arrow keys), without moving the page itself.
  htmx.onLoad(function (elt) {
    var tabs = elt.id === "tabs" ? elt : elt.querySelector && elt.querySelector("#tabs");
    var selected = tabs && tabs.querySelector('[role="tab"][aria-selected="true"]');
    if (!selected) {
      return;
    }
    var bar = tabs.getBoundingClientRect();
    var tab = selected.getBoundingClientRect();
    if (tab.left < bar.left) {
      tabs.scrollLeft -= bar.left - tab.left + 16;
    } else if (tab.right > bar.right) {
      tabs.scrollLeft += tab.right - bar.right + 16;
    }
  });

  // The state arrives with the page, or pushed by the live socket when it changes.
  htmx.onLoad(function (elt) {
    if (elt.id === "session-state" || (elt.querySelector && elt.querySelector("#session-state"))) {
      toolsWhenReady();
    }
  });
})();
