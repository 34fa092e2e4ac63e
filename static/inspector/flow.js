// The message flow (templates/sessions/flow/): remember each person's "Table | Flow" choice, ask the
// live socket for it, and light up a frame's pair (request <-> response) and its call on hover/focus.
(function () {
  "use strict";
  var KEY = "inspector.timelineView";

  function wanted() {
    try {
      return window.localStorage.getItem(KEY) === "flow" ? "flow" : "table";
    } catch (e) {
      return "table"; // storage refused (a private window's policy): the table, as by default
    }
  }

  function remember(view) {
    try {
      window.localStorage.setItem(KEY, view);
    } catch (e) {
      // nothing to remember it in: the switch still works for this page
    }
  }

  function showPressed(view) {
    document.querySelectorAll("[data-timeline-view]").forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.dataset.timelineView === view));
    });
  }

  // Every (re)connect asks for the view chosen: the socket draws the rows the way this tab shows them.
  var create = htmx.createWebSocket;
  htmx.createWebSocket = function (url) {
    var parsed = new URL(url, window.location.href);
    if (document.querySelector("[data-timeline-view]")) {
      parsed.searchParams.set("view", wanted());
    }
    return create(parsed.toString());
  };

  htmx.onLoad(function (elt) {
    if (elt.querySelector && elt.querySelector("[data-timeline-view]")) {
      showPressed(wanted());
    }
  });
  document.addEventListener("click", function (event) {
    var button = event.target.closest && event.target.closest("[data-timeline-view]");
    if (button) {
      remember(button.dataset.timelineView);
      showPressed(button.dataset.timelineView);
    }
  });

  // Hover or focus: the frame, the frames it pairs with (both ways), and the call it belongs to.
  var lit = [];

  function clear() {
    lit.forEach(function (row) {
      row.classList.remove("flow-source", "flow-paired", "flow-grouped");
    });
    lit = [];
  }

  function light(row, name) {
    row.classList.add(name);
    lit.push(row);
  }

  function highlight(row) {
    clear();
    var rows = document.getElementById("timeline-rows");
    var group = row.dataset.group;
    if (group) {
      rows.querySelectorAll('[data-group="' + group + '"]').forEach(function (other) {
        light(other, "flow-grouped");
      });
    }
    (row.dataset.pair || "").split(" ").forEach(function (seq) {
      var other = seq && document.getElementById("f-" + seq);
      if (other) {
        light(other, "flow-paired");
      }
    });
    rows.querySelectorAll('[data-pair~="' + row.dataset.seq + '"]').forEach(function (other) {
      light(other, "flow-paired");
    });
    light(row, "flow-source");
  }

  function flowRow(target) {
    return target.closest && target.closest("#timeline-rows.flow > .flow-row");
  }

  ["mouseover", "focusin"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var row = flowRow(event.target);
      if (row && !row.classList.contains("flow-source")) {
        highlight(row);
      }
    });
  });
  ["mouseout", "focusout"].forEach(function (type) {
    document.addEventListener(type, function (event) {
      var row = flowRow(event.target);
      var next = event.relatedTarget && flowRow(event.relatedTarget);
      if (row && next !== row) {
        clear();
      }
    });
  });
})();
