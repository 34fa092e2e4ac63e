// The little the server cannot do: resume the live socket after the last frame shown, keep the
// timeline window bounded, follow the newest frame, and count pending requests in the tab title.
(function () {
  "use strict";
  var MAX_ROWS = 1000;

  function lastSeq() {
    var rows = document.getElementById("timeline-rows");
    var last = rows && rows.lastElementChild;
    return last && last.dataset.seq ? last.dataset.seq : null;
  }

  function firstSeq() {
    var rows = document.getElementById("timeline-rows");
    var first = rows && rows.firstElementChild;
    return first && first.dataset.seq ? first.dataset.seq : null;
  }

  // On every (re)connect, ask for the frames after the newest one on the page: no gaps, no repeats.
  htmx.createWebSocket = function (url) {
    var parsed = new URL(url, window.location.href);
    var after = lastSeq();
    if (after !== null) {
      parsed.searchParams.set("after", after);
      parsed.searchParams.set("first", firstSeq());
    }
    parsed.protocol = window.location.protocol === "https:" ? "wss:" : "ws:";
    return new WebSocket(parsed.toString());
  };

  var follow = true;

  function pane() {
    return document.getElementById("timeline-rows");
  }

  document.addEventListener("scroll", function (event) {
    var rows = pane();
    if (rows && event.target === rows) {
      follow = rows.scrollTop + rows.clientHeight >= rows.scrollHeight - 40;
    }
  }, true);

  // Following the newest row waits for the next frame: reading scrollHeight lays the page out, and
  // done for every message (a flood sends many a frame) it made each message a layout of its own.
  var scrolling = false;

  function followLater() {
    if (scrolling) {
      return;
    }
    scrolling = true;
    requestAnimationFrame(function () {
      scrolling = false;
      var rows = pane();
      if (rows && follow) {
        rows.scrollTop = rows.scrollHeight;
      }
    });
  }

  function afterMessage() {
    var rows = pane();
    if (rows) {
      var extra = rows.children.length - MAX_ROWS;
      for (var i = 0; i < extra; i++) {
        rows.removeChild(rows.firstElementChild);
      }
      if (follow) {
        followLater();
      }
    }
    var log = document.getElementById("log-lines");
    var keep = log ? parseInt(log.dataset.limit || "0", 10) : 0;
    for (var j = log && keep > 0 ? log.children.length - keep : 0; j > 0; j--) {
      log.removeChild(log.firstElementChild);
    }
    var reviews = document.getElementById("reviews");
    var held = document.getElementById("tap-held");
    var session = document.querySelector("[data-session-name]");
    if (reviews && session) {
      // Requests waiting for a person, and messages a tap holds for one.
      var count = parseInt(reviews.dataset.count || "0", 10) + parseInt(held ? held.dataset.count || "0" : "0", 10);
      var base = session.dataset.sessionName + " · MCP Inspector";
      document.title = count > 0 ? "(" + count + ") " + base : base;
    }
  }

  // The timeline's rows, most of what a busy session sends, are swapped by two swap styles of this
  // extension: "rows" replaces the pane's rows and takes the new pane's attributes (the view it
  // shows), "rowsend" appends rows of the view the pane shows. Rows carry no hx- attributes, so
  // htmx's clean-up of every old row and its processing of every new one would find nothing to do,
  // at a cost a flood's redraws, several a second, make the page feel.
  htmx.defineExtension("timeline", {
    transformResponse: function (text) {
      return shown(text);
    },
    handleSwap: function (swapStyle, target, fragment) {
      if (swapStyle === "rows") {
        target.getAttributeNames().forEach(function (name) {
          if (!fragment.hasAttribute(name)) {
            target.removeAttribute(name);
          }
        });
        fragment.getAttributeNames().forEach(function (name) {
          target.setAttribute(name, fragment.getAttribute(name));
        });
        if (!follow) {
          target.scrollTop = 0; // as on a new pane: the page starts at its top
        }
        target.replaceChildren.apply(target, Array.prototype.slice.call(fragment.childNodes));
        return true;
      }
      if (swapStyle === "rowsend") {
        if ((target.dataset.view || "table") === (fragment.dataset.view || "table")) {
          target.append.apply(target, Array.prototype.slice.call(fragment.childNodes));
        }
        return true; // rows of the other view, sent before the tab's switch arrived, are dropped
      }
      return false;
    },
  });

  // The live socket sends every tab the same fragments, and a tab may not show some of their
  // targets (another panel, a call made elsewhere): it drops those, which htmx would log as errors.
  function present(element) {
    var oob = element.getAttribute("hx-swap-oob");
    if (!oob) {
      return true;
    }
    var colon = oob.indexOf(":");
    var selector = colon >= 0 ? oob.slice(colon + 1) : "#" + element.id;
    return selector === "#" || document.querySelector(selector) !== null;
  }

  function shown(html) {
    if (html.indexOf("hx-swap-oob") < 0) {
      return html;
    }
    var template = document.createElement("template");
    template.innerHTML = html;
    var elements = Array.prototype.slice.call(template.content.children);
    var missing = elements.filter(function (element) { return !present(element); });
    if (!missing.length) {
      return html;
    }
    missing.forEach(function (element) { element.remove(); });
    return template.innerHTML;
  }

  document.addEventListener("htmx:wsAfterMessage", afterMessage);
  document.addEventListener("htmx:afterSettle", afterMessage);
  document.addEventListener("DOMContentLoaded", afterMessage);

  // A timeline row opens its frame on click or Enter. One listener for all rows: rows of their own
  // (hx-get on each) would cost htmx a pass over every row a flood redraws.
  function openFrame(row) {
    var rows = row.closest("#timeline-rows");
    var url = rows.dataset.frameUrl.replace(/0$/, row.dataset.seq);
    htmx.ajax("GET", url, { target: "#frame-detail" });
  }

  document.addEventListener("click", function (event) {
    var row = event.target.closest && event.target.closest("#timeline-rows .frame");
    if (row) {
      openFrame(row);
    }
  });

  // Keyboard: Enter opens the focused row; ArrowDown/ArrowUp (or j/k) move along the rows.
  document.addEventListener("keydown", function (event) {
    var row = event.target.classList && event.target.classList.contains("frame") ? event.target : null;
    if (!row || event.altKey || event.ctrlKey || event.metaKey) {
      return;
    }
    if (event.key === "Enter") {
      openFrame(row);
      return;
    }
    var next = null;
    if (event.key === "ArrowDown" || event.key === "j") {
      next = row.nextElementSibling;
    } else if (event.key === "ArrowUp" || event.key === "k") {
      next = row.previousElementSibling;
    }
    if (next && next.classList.contains("frame")) {
      event.preventDefault();
      next.focus();
    }
  });

  // "show" on a Conformance row (or a verdict badge): filter the timeline to that rule.
  document.addEventListener("click", function (event) {
    var trigger = event.target.closest && event.target.closest("[data-filter-rule]");
    var input = document.getElementById("filter-rule");
    if (!trigger || !input) {
      return;
    }
    event.stopPropagation();
    input.value = trigger.dataset.filterRule;
    input.form.dispatchEvent(new Event("change", { bubbles: true }));
  }, true);

  // "Reply" on a note (or "new thread"): the frame's one note form answers that thread, or starts one.
  document.addEventListener("click", function (event) {
    var trigger = event.target.closest && event.target.closest("[data-reply-to]");
    var form = trigger && document.getElementById(trigger.dataset.form);
    if (!form) {
      return;
    }
    form.elements.reply_to.value = trigger.dataset.replyTo;
    form.querySelector(".replying").textContent = trigger.dataset.label;
    form.elements.text.focus();
  });

  // A oneOf/anyOf field shows only the variant picked (its fields and their required stars); the
  // server renders the same choice on a re-render, and reads only that variant's inputs.
  document.addEventListener("change", function (event) {
    var select = event.target;
    if (!select.matches || !select.matches("select[data-variant-select]")) {
      return;
    }
    var children = select.closest(".sf-choice").querySelector(":scope > .sf-children");
    Array.prototype.forEach.call(children.children, function (variant) {
      if (variant.classList.contains("sf-variant")) {
        variant.hidden = variant.dataset.variant !== select.value;
      }
    });
  });

  document.addEventListener("click", function (event) {
    var closer = event.target.closest("[data-close]");
    if (closer) {
      var target = document.querySelector(closer.dataset.close);
      if (target) {
        target.innerHTML = "";
      }
    }
  });

  // A page the browser shows again (Back) is a new intent: the runtime remembers a connected one, so
  // hints from the old key would start nothing.
  function renewIntents() {
    var fresh = "~" + Math.random().toString(36).slice(2, 10);
    document.querySelectorAll("input[name=intent]").forEach(function (input) {
      input.value = input.value.split("~")[0] + fresh;
    });
  }
  window.addEventListener("pageshow", function (event) {
    if (event.persisted) {
      renewIntents();
    }
  });
  document.addEventListener("htmx:historyRestore", renewIntents);

  // Back after Connect shows the connect form as the person left it: htmx keeps the page's markup,
  // not what was typed, so what was typed becomes markup first. Never a secret (passwords, the
  // environment, headers): the history is kept in the browser's storage.
  var KEPT = ["transport", "name", "command", "args", "url", "cwd", "protocol_version", "mode"];
  function keepTyped(field) {
    if (!field || field.type === "password") {
      return;
    }
    if (typeof RadioNodeList !== "undefined" && field instanceof RadioNodeList) {
      Array.prototype.forEach.call(field, keepTyped);
    } else if (field.tagName === "SELECT") {
      Array.prototype.forEach.call(field.options, function (option) {
        option.toggleAttribute("selected", option.selected);
      });
    } else if (field.tagName === "TEXTAREA") {
      field.textContent = field.value;
    } else if (field.type === "checkbox" || field.type === "radio") {
      field.toggleAttribute("checked", field.checked);
    } else {
      field.setAttribute("value", field.value);
    }
  }
  // The rest loses what the server put in its markup too (a form with errors comes back filled in).
  function forget(field) {
    if (field.tagName === "TEXTAREA") {
      field.textContent = "";
    } else if (field.tagName === "INPUT" && field.type !== "hidden" && field.type !== "checkbox" && field.type !== "radio") {
      field.removeAttribute("value");
    }
  }
  document.addEventListener("htmx:beforeHistorySave", function () {
    var form = document.getElementById("connect-form");
    if (form) {
      Array.prototype.forEach.call(form.elements, function (field) {
        if (KEPT.indexOf(field.name) < 0) {
          forget(field);
        }
      });
      KEPT.forEach(function (name) {
        keepTyped(form.elements.namedItem(name));
      });
    }
  });
})();
