// The session page's interaction: running call cards finished over the live socket (no polling), the
// session switcher, tabs moved with the keyboard, focus kept across swaps, Escape on the frame detail.
(function () {
  "use strict";

  // --- running call cards ------------------------------------------------------------------------
  // The socket pushes each card's progress and, once, its finished state and body; the card itself
  // (its Cancel button) stays the same node. The tab tells the socket which cards still run, on every
  // (re)connect and for every new card, so an answer that came while the socket was down, or before
  // the card was on the page, still finishes it.
  var socket = null;

  function runningIds(root) {
    var cards = [];
    if (root.matches && root.matches("article.call.running")) {
      cards.push(root);
    }
    Array.prototype.push.apply(cards, root.querySelectorAll ? root.querySelectorAll("article.call.running") : []);
    return cards.map(function (card) { return parseInt(card.dataset.rpcId, 10); }).filter(function (id) {
      return id >= 0;
    });
  }

  function askAbout(ids) {
    if (socket && ids.length) {
      socket.send(JSON.stringify({ action: "calls", ids: ids }));
    }
  }

  // Which panel the tab shows: the socket sends a panel's live lines (the log) only to tabs showing it.
  var panelTold = null;

  function tellPanel(always) {
    var tab = document.querySelector('#tabs [role="tab"][aria-selected="true"]');
    var name = tab ? tab.id.replace(/^tab-/, "") : "";
    if (socket && (always || name !== panelTold)) {
      var level = document.getElementById("log-min-level");
      socket.send(JSON.stringify({ action: "panel", name: name, min_level: level ? level.value : "" }));
      panelTold = name;
    }
  }

  document.addEventListener("htmx:wsOpen", function (event) {
    socket = event.detail.socketWrapper;
    tellPanel(true);
    askAbout(runningIds(document));
  });

  // A tool's call form goes over the live socket while it is open (ws-send), with no request of its
  // own to make, and is posted while it is not: htmx runs only the first of an element's handlers for
  // an event, ws-send's, so its hx-post is issued from here.
  var socketOpen = false;
  document.addEventListener("htmx:wsOpen", function () { socketOpen = true; });
  document.addEventListener("htmx:wsClose", function () { socketOpen = false; });
  document.addEventListener("htmx:wsConfigSend", function (event) {
    var form = event.target;
    if (socketOpen || !form.hasAttribute("hx-post")) {
      return;
    }
    event.preventDefault();
    if (event.detail.triggeringEvent) {
      event.detail.triggeringEvent.preventDefault(); // no native submission either
    }
    htmx.ajax("POST", form.getAttribute("hx-post"), {
      source: form, target: form.getAttribute("hx-target"), swap: form.getAttribute("hx-swap"),
    });
  });

  document.addEventListener("htmx:afterSettle", function () {
    tellPanel(false);
  });

  document.addEventListener("htmx:load", function (event) {
    var elt = event.detail.elt;
    if (elt.matches && elt.matches(".call-body[data-call-class]")) {
      var card = elt.closest("article.call");
      if (card) {
        card.className = elt.dataset.callClass; // running → done, failed or tool error
      }
      return;
    }
    if (elt !== document.body) {
      askAbout(runningIds(elt));
    }
  });

  // A new request's card comes to every tab over the socket. The tab that made it gets it in its own
  // answer too, before or after: one card per request either way, the one that came first (a person
  // may already be pressing its Cancel).
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var fragment = event.detail.fragment;
    if (event.detail.target && event.detail.target.id === "call-list" && fragment && fragment.querySelectorAll) {
      Array.prototype.forEach.call(fragment.querySelectorAll("article.call[id]"), function (card) {
        if (document.getElementById(card.id)) {
          card.remove();
        }
      });
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var list = event.detail.target;
    if (list && list.id === "call-list") {
      // An answer's card goes on top: a card of the same request below it came first.
      var seen = {};
      Array.prototype.slice.call(list.querySelectorAll(":scope > article.call[id]")).reverse().forEach(function (card) {
        if (seen[card.id]) {
          card.remove();
        }
        seen[card.id] = true;
      });
    }
  });

  // --- tabs: the ARIA tablist pattern ------------------------------------------------------------
  // One tab in the page's Tab order (the selected one); Left/Right, Home/End move between tabs;
  // Enter or Space opens the focused one. A tab switch redraws the tabs: htmx puts focus back on the
  // tab with the same id.
  function tabsOf(list) {
    return Array.prototype.slice.call(list.querySelectorAll('[role="tab"]'));
  }

  function rove(list) {
    var tabs = tabsOf(list);
    var selected = tabs.filter(function (tab) { return tab.getAttribute("aria-selected") === "true"; })[0] || tabs[0];
    // The Tab stop stays on the tab the keyboard is on (any socket message re-runs this), else the selected one.
    var stop = tabs.indexOf(document.activeElement) >= 0 ? document.activeElement : selected;
    tabs.forEach(function (tab) { tab.tabIndex = tab === stop ? 0 : -1; });
    var panel = selected && document.getElementById(selected.getAttribute("aria-controls"));
    if (panel && selected.id) {
      panel.setAttribute("aria-labelledby", selected.id);
    }
  }

  document.addEventListener("keydown", function (event) {
    var tab = event.target.closest && event.target.closest('[role="tablist"] [role="tab"]');
    if (!tab || event.altKey || event.ctrlKey || event.metaKey) {
      return;
    }
    var tabs = tabsOf(tab.closest('[role="tablist"]'));
    var at = tabs.indexOf(tab);
    var next = null;
    if (event.key === "ArrowRight") {
      next = tabs[(at + 1) % tabs.length];
    } else if (event.key === "ArrowLeft") {
      next = tabs[(at - 1 + tabs.length) % tabs.length];
    } else if (event.key === "Home") {
      next = tabs[0];
    } else if (event.key === "End") {
      next = tabs[tabs.length - 1];
    } else if (event.key === " " || event.key === "Enter") {
      // A tab redrawn a moment ago is wired by htmx only when its swap settles: until then Enter
      // would follow its link (a whole page load that drops the focus). Wire it now, then open it.
      event.preventDefault();
      htmx.process(tab);
      tab.click();
      return;
    }
    if (next) {
      event.preventDefault();
      tabs.forEach(function (other) { other.tabIndex = other === next ? 0 : -1; });
      next.focus();
    }
  });

  // --- focus kept across swaps -------------------------------------------------------------------
  // A swap that replaces the focused control (List tools, a page button, a tab) would drop focus to
  // the top of the page. Put it back on the control that took its place: the same id, else the same
  // request (hx-get/hx-post) and kind, else the same label.

  function actionOf(elt) {
    return (elt.closest("form") || elt).getAttribute("hx-post") || elt.getAttribute("hx-get") || "";
  }

  function shown(tag) {
    return Array.prototype.filter.call(document.querySelectorAll(tag), function (elt) {
      return elt.getClientRects().length > 0;
    });
  }

  function describe(elt, same) {
    var action = actionOf(elt);
    var twins = (same || shown(elt.tagName)).filter(function (other) { return action && actionOf(other) === action; });
    return {
      id: elt.id,
      tag: elt.tagName,
      action: action,
      actionAt: twins.indexOf(elt) >= 0 ? action + "@" + twins.indexOf(elt) : "",
      href: elt.getAttribute("href") || "",
      label: elt.getAttribute("aria-label") || elt.getAttribute("name") || "",
      text: (elt.textContent || "").trim(),
    };
  }

  function find(was) {
    if (was.id) {
      return document.getElementById(was.id);
    }
    var same = shown(was.tag);
    var keys = ["action", "actionAt", "href", "label", "text"];
    for (var k = 0; k < keys.length; k++) {
      var key = keys[k];
      if (!was[key]) {
        continue;
      }
      var hits = same.filter(function (elt) { return describe(elt, same)[key] === was[key]; });
      if (hits.length === 1) {
        return hits[0];
      }
    }
    return null;
  }

  // A request's swap: describe the focused control now (its place among its twins). A socket message
  // (many a second in a flood): only note it, and describe it if it was swapped out. Each kind keeps
  // its own note: a socket message may come between a request's swap and its settling.
  function remember(note, full) {
    var active = document.activeElement;
    if ((!active || active === document.body) && note.elt) {
      return; // another swap dropped focus and has not settled yet: it is that control to put back
    }
    note.elt = active && active !== document.body ? active : null;
    note.was = note.elt && full ? describe(note.elt) : null;
  }

  function restore(note) {
    var lists = document.querySelectorAll('[role="tablist"]');
    Array.prototype.forEach.call(lists, rove);
    var elt = note.elt;
    var was = note.was;
    note.elt = note.was = null;
    if (!elt || document.body.contains(elt)) {
      return; // focus is still on something on the page
    }
    var active = document.activeElement;
    if (active && active !== document.body && document.body.contains(active)) {
      return; // the swap itself put focus somewhere (htmx does, on an element with the same id)
    }
    var again = find(was || describe(elt, []));
    if (again) {
      again.focus({ preventScroll: true });
      again.scrollIntoView({ block: "nearest" });
    }
  }

  var swapped = { elt: null, was: null };
  var pushed = { elt: null, was: null };
  document.addEventListener("htmx:beforeSwap", function () { remember(swapped, true); });
  document.addEventListener("htmx:afterSettle", function () { restore(swapped); });
  document.addEventListener("htmx:wsBeforeMessage", function () { remember(pushed, false); });
  document.addEventListener("htmx:wsAfterMessage", function () { restore(pushed); });

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll('[role="tablist"]'), rove);
  });

  // A panel the server pushes again (the overview on every state change) keeps what the person
  // opened or closed in it: each <details> is known by its class and summary.
  function detailsKey(details) {
    var summary = details.querySelector("summary");
    return details.className + "|" + (summary ? summary.textContent.trim() : "");
  }
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var target = event.detail.target;
    var fragment = event.detail.fragment;
    if (!target || !fragment || !fragment.querySelectorAll) {
      return;
    }
    var open = {};
    Array.prototype.forEach.call(target.querySelectorAll("details"), function (details) {
      open[detailsKey(details)] = details.open;
    });
    Array.prototype.forEach.call(fragment.querySelectorAll("details"), function (details) {
      var key = detailsKey(details);
      if (Object.prototype.hasOwnProperty.call(open, key)) {
        details.open = open[key];
      }
    });
  });

  // --- the frame detail: Escape closes it, focus goes back to what opened it ------------------------
  var opener = null;

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    var target = event.detail.target;
    if (target && target.id === "frame-detail" && elt && elt !== document.body && elt !== target) {
      opener = elt;
    }
  });

  document.addEventListener("click", function (event) {
    var row = event.target.closest && event.target.closest("#timeline-rows .frame");
    if (row) {
      opener = row;
    }
  }, true);

  document.addEventListener("keydown", function (event) {
    var row = event.target.classList && event.target.classList.contains("frame") ? event.target : null;
    if (row && event.key === "Enter") {
      opener = row;
    }
  }, true);

  function closeDetail() {
    var detail = document.getElementById("frame-detail");
    if (!detail || !detail.firstElementChild) {
      return false;
    }
    detail.innerHTML = "";
    var back = opener;
    if (back && !document.body.contains(back) && back.id) {
      back = document.getElementById(back.id); // the row was redrawn: the same frame's new row
    }
    if (back && document.body.contains(back)) {
      back.focus({ preventScroll: true });
      back.scrollIntoView({ block: "nearest" });
    }
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented) {
      return;
    }
    if (document.querySelector("details.switcher[open]")) {
      return; // the switcher closes first
    }
    if (closeDetail()) {
      event.preventDefault();
    }
  });

  document.addEventListener("click", function (event) {
    var closer = event.target.closest && event.target.closest('[data-close="#frame-detail"]');
    if (closer) {
      event.preventDefault();
      closeDetail();
    }
  }, true);

  // --- the session switcher ----------------------------------------------------------------------
  // Its list loads when opened (htmx, on "toggle") and again every few seconds while it stays open,
  // so live sessions' states are current. Up/Down move along it; Escape closes it.
  var REFRESH_MS = 5000;
  var refresher = null;

  document.addEventListener("toggle", function (event) {
    var menu = event.target;
    if (!menu.matches || !menu.matches("details.switcher")) {
      return;
    }
    clearInterval(refresher);
    refresher = null;
    if (menu.open) {
      var list = menu.querySelector(".switcher-list");
      htmx.trigger(list, "refresh");
      refresher = setInterval(function () {
        if (menu.open && document.visibilityState === "visible") {
          htmx.trigger(list, "refresh");
        }
      }, REFRESH_MS);
    }
  }, true);

  // A list redrawn between a press on one of its links and the release would lose the click (the
  // release lands on a new element): a refresh that arrives while it is pressed is not swapped in.
  var pressed = null;
  document.addEventListener("pointerdown", function (event) {
    pressed = event.target.closest ? event.target.closest(".switcher-list") : null;
  }, true);
  document.addEventListener("pointerup", function () {
    pressed = null;
  }, true);
  document.addEventListener("pointercancel", function () {
    pressed = null;
  }, true);
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (pressed !== null && event.detail.target === pressed) {
      event.detail.shouldSwap = false;
    }
  });

  document.addEventListener("keydown", function (event) {
    var menu = event.target.closest && event.target.closest("details.switcher[open]");
    if (!menu && event.key === "Escape" && event.target === document.body) {
      menu = document.querySelector("details.switcher[open]"); // focus was lost: Escape still closes it
    }
    if (!menu) {
      return;
    }
    var links = Array.prototype.slice.call(menu.querySelectorAll(".switcher-list a"));
    var at = links.indexOf(event.target);
    if (event.key === "Escape") {
      event.preventDefault();
      menu.open = false;
      menu.querySelector("summary").focus();
    } else if (event.key === "ArrowDown" && links.length) {
      event.preventDefault();
      links[at < 0 ? 0 : Math.min(at + 1, links.length - 1)].focus();
    } else if (event.key === "ArrowUp" && links.length) {
      event.preventDefault();
      links[at <= 0 ? 0 : at - 1].focus();
    }
  });
})();
