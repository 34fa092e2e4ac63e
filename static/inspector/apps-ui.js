// The MCP Apps host's dealings with the person (apps.js is the protocol): a link the view asks to
// open, what a model would receive, and the view's display mode (inline or fullscreen).
(function () {
  "use strict";

  var Host = window.InspectorApps.Host;
  // The display modes this host can give a view; a view gets one only if it says it supports it.
  var DISPLAY_MODES = ["inline", "fullscreen"];
  Host.DISPLAY_MODES = DISPLAY_MODES;

  Host.prototype.showForModel = function (method, params) {
    this.model.hidden = false;
    var list = this.model.querySelector(".app-model-list");
    var item = document.createElement("li");
    var label = document.createElement("strong");
    label.textContent =
      method === "ui/message"
        ? "A message the view would add to the conversation (role " + String(params.role || "user") + "):"
        : "Context the view would give the model on its next turn (replacing the last):";
    var body = document.createElement("pre");
    body.className = "json";
    body.textContent = JSON.stringify(params.content !== undefined ? params.content : params, null, 2);
    item.append(label, body);
    var composer = this.section.closest("#chat-log") && document.querySelector("form.chat-composer textarea");
    if (method === "ui/message" && composer) {
      // In a chat the message can go to the model, as the person's own: they put it in the message
      // box, read it, and send it.
      var texts = (Array.isArray(params.content) ? params.content : [params.content]).filter(function (block) {
        return block && block.type === "text" && typeof block.text === "string";
      });
      if (texts.length) {
        var put = document.createElement("button");
        put.type = "button";
        put.textContent = "Put in the message box";
        put.addEventListener("click", function () {
          composer.value = texts.map(function (block) { return block.text; }).join("\n");
          composer.focus();
        });
        item.append(put);
      }
    }
    if (method === "ui/update-model-context") {
      list.querySelectorAll("li[data-kind=context]").forEach(function (old) {
        old.remove();
      });
      item.dataset.kind = "context";
      var holder = this.section.closest("[data-context-url]");
      if (holder) {
        var note = document.createElement("p");
        note.className = "muted app-context-state";
        note.textContent = "giving it to the chat's model…";
        item.append(note);
        var context = {};
        ["content", "structuredContent"].forEach(function (key) {
          if (params && params[key] !== undefined) {
            context[key] = params[key];
          }
        });
        this.giveContext(holder.dataset.contextUrl, context, note);
      }
    }
    list.append(item);
  };

  // In a chat the context goes to the model on its next turns, each replacing the last: one request
  // at a time, and of the contexts that came meanwhile only the newest follows it.
  Host.prototype.giveContext = function (url, context, note) {
    var host = this;
    if (this.contextSending) {
      this.contextNext = { url: url, context: context, note: note };
      return;
    }
    this.contextSending = true;
    window.InspectorApps.post(url, context, true)
      .then(function () {
        note.textContent = "given to the chat's model on its next turn";
      })
      .catch(function (error) {
        note.textContent = "not given to the model: " + error.message;
      })
      .then(function () {
        host.contextSending = false;
        var next = host.contextNext;
        host.contextNext = null;
        if (next) {
          host.giveContext(next.url, next.context, next.note);
        }
      });
  };

  // What a view's _meta.ui.permissions may ask for, and the iframe's permission policy for each.
  var PERMISSIONS = {
    camera: ["camera", "the camera"],
    microphone: ["microphone", "the microphone"],
    geolocation: ["geolocation", "your location"],
    clipboardWrite: ["clipboard-write", "writing to the clipboard"],
  };

  // The permissions a view asks for are the person's to grant, before its frame exists (a frame's
  // policy is fixed when it is made); ``done`` gets the features granted, none when refused.
  Host.prototype.askPermissions = function (ui, done) {
    var asked = ui && typeof ui.permissions === "object" && ui.permissions ? ui.permissions : {};
    var names = Object.keys(PERMISSIONS).filter(function (name) {
      return Object.prototype.hasOwnProperty.call(asked, name);
    });
    if (!names.length || this.readonly) {
      done([]);
      return;
    }
    var ask = document.createElement("div");
    ask.className = "app-ask notice";
    ask.setAttribute("role", "alert");
    var text = document.createElement("p");
    text.textContent =
      "The view asks for " +
      names.map(function (name) { return PERMISSIONS[name][1]; }).join(", ") +
      ". The browser still asks you before any is used.";
    var allow = document.createElement("button");
    allow.type = "button";
    allow.textContent = "Allow";
    var refuse = document.createElement("button");
    refuse.type = "button";
    refuse.textContent = "Render without";
    ask.append(text, allow, " ", refuse);
    this.asks.append(ask);
    this.say("waiting for you: the view asks for permissions");
    allow.addEventListener("click", function () {
      ask.remove();
      done(names);
    });
    refuse.addEventListener("click", function () {
      ask.remove();
      done([]);
    });
  };

  Host.prototype.permissionPolicy = function (granted) {
    return granted.map(function (name) { return PERMISSIONS[name][0]; }).join("; ");
  };

  Host.prototype.askToOpen = function (id, url) {
    var host = this;
    var parsed = null;
    try {
      parsed = new URL(String(url));
    } catch (error) {
      parsed = null;
    }
    if (!parsed || (parsed.protocol !== "https:" && parsed.protocol !== "http:")) {
      this.reply(id, { isError: true });
      this.log("in", { method: "ui/open-link", params: { url: url } }, "refused: only http and https links open");
      return;
    }
    var ask = document.createElement("div");
    ask.className = "app-ask notice";
    ask.setAttribute("role", "alert");
    var text = document.createElement("p");
    text.textContent = "The view asks to open a link on ";
    var hostName = document.createElement("strong");
    hostName.textContent = parsed.host;
    var full = document.createElement("code");
    full.textContent = parsed.href;
    text.append(hostName, ": ", full);
    var open = document.createElement("button");
    open.type = "button";
    open.textContent = "Open link";
    var refuse = document.createElement("button");
    refuse.type = "button";
    refuse.textContent = "Refuse";
    ask.append(text, open, " ", refuse);
    this.asks.append(ask);
    open.addEventListener("click", function () {
      ask.remove();
      window.open(parsed.href, "_blank", "noopener,noreferrer");
      host.reply(id, {});
    });
    refuse.addEventListener("click", function () {
      ask.remove();
      host.reply(id, { isError: true });
    });
  };

  // The mode the view asked for if both sides support it, else the one it has; answered either way.
  Host.prototype.requestDisplayMode = function (mode) {
    var supported = this.viewModes || ["inline"];
    if (DISPLAY_MODES.indexOf(mode) < 0 || supported.indexOf(mode) < 0) {
      return this.mode || "inline";
    }
    this.displayIn(mode, false);
    return mode;
  };

  Host.prototype.displayIn = function (mode, byPerson) {
    var host = this;
    if ((this.mode || "inline") === mode) {
      return;
    }
    this.mode = mode;
    this.section.dataset.displayMode = mode;
    this.section.classList.toggle("app-fullscreen", mode === "fullscreen");
    var exit = this.section.querySelector(".app-exit-fullscreen");
    if (mode === "fullscreen" && !exit) {
      exit = document.createElement("button");
      exit.type = "button";
      exit.className = "app-exit-fullscreen";
      exit.textContent = "Exit fullscreen";
      exit.addEventListener("click", function () {
        host.displayIn("inline", true);
      });
      this.section.querySelector(".app-close").before(exit, " ");
    }
    if (exit) {
      exit.hidden = mode !== "fullscreen";
      if (mode === "fullscreen") {
        exit.focus();
      }
    }
    var context = { displayMode: mode, containerDimensions: this.hostContext().containerDimensions };
    if (byPerson) {
      this.notify("ui/notifications/host-context-changed", context);
    } else {
      // After the answer to the view's request, which says the mode first.
      window.setTimeout(function () {
        host.notify("ui/notifications/host-context-changed", context);
      });
    }
  };

  // Escape takes a fullscreen view back inline, as the person expects of anything fullscreen.
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") {
      return;
    }
    var section = document.querySelector("section.app-view.app-fullscreen");
    if (section && section.appsHost) {
      section.appsHost.displayIn("inline", true);
    }
  });
})();
