// The MCP Apps host: each view of a tool call (a section.app-view the server put after its call card)
// is rendered in an iframe with an opaque origin (sandbox="allow-scripts", no allow-same-origin; its
// document is served with its own CSP and "sandbox allow-scripts"), and spoken to over postMessage
// JSON-RPC as the ext-apps protocol says. Only messages whose source is that frame's window count.
// What the view asks of the server goes through the session (apps/request), so it is on the timeline;
// every message either way is shown in the view's log.
(function () {
  "use strict";

  var PROTOCOL_VERSIONS = ["2026-01-26"];
  var MIN_HEIGHT = 60;
  var MAX_HEIGHT = 4000;
  var LOG_LIMIT = 500;
  var TEARDOWN_WAIT_MS = 2000;
  // The timeline gets the messages in batches: at most this many a batch, a batch at most this often,
  // and no more than this many waiting (a view that floods the page has the rest counted, not kept).
  var BATCH = 200;
  var FLUSH_MS = 500;
  var OUTBOX_LIMIT = 1000;
  var MESSAGE_CHARS = 65536;
  // Half of what a browser lets requests that outlive their page carry (64 KiB, all of them together).
  var KEEPALIVE_BYTES = 32768;
  // A view flooding the page: past this many messages a second, the log shows a count, not each.
  var SHOWN_PER_SECOND = 100;
  // Past this many a second, a view's messages are ignored (counted, and said on the timeline): a
  // view must not keep the page from answering the person.
  var HEARD_PER_SECOND = 300;
  // Past this many in a second the view is stopped (its frame removed): the page's main thread
  // receives every message a frame posts, read or not, and a person's input waits behind them.
  var STOP_PER_SECOND = 2000;
  var hosts = [];

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  function theme() {
    var chosen = document.documentElement.dataset.theme;
    if (chosen === "light" || chosen === "dark") {
      return chosen;
    }
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
  }

  // ``outlive``: a JSON body that fits the browser's budget goes in a request that is finished even
  // if the page goes away meanwhile (keepalive; an ordinary one is cancelled with the page).
  function post(url, body, json, outlive) {
    var headers = { "X-CSRFToken": csrfToken() };
    var text = json ? JSON.stringify(body) : body;
    if (json) {
      headers["Content-Type"] = "application/json";
    }
    return fetch(url, {
      method: "POST",
      headers: headers,
      credentials: "same-origin",
      keepalive: !!(outlive && json && bytes(text) <= KEEPALIVE_BYTES),
      body: text,
    }).then(function (response) {
      return response.json().then(function (data) {
        if (!response.ok) {
          throw new Error(data && data.message ? data.message : "HTTP " + response.status);
        }
        return data;
      });
    });
  }

  function bytes(text) {
    return new Blob([text]).size;
  }

  function short(value) {
    var text;
    try {
      text = JSON.stringify(value);
    } catch (error) {
      text = String(value);
    }
    return text && text.length > 400 ? text.slice(0, 400) + "…" : text;
  }

  function Host(section) {
    this.section = section;
    this.tool = section.dataset.tool;
    this.rpcId = section.dataset.rpcId;
    this.state = section.querySelector(".app-view-state");
    this.slot = section.querySelector(".app-slot");
    this.asks = section.querySelector(".app-asks");
    this.model = section.querySelector(".app-model");
    this.logList = section.querySelector(".app-log-list");
    this.logCount = section.querySelector(".app-log-count");
    this.logged = 0;
    this.frame = null;
    this.initialized = false;
    this.held = [];
    this.nextId = 1;
    this.pending = {};
    this.call = null;
    this.gone = false;
    this.outbox = [];
    this.dropped = 0;
    this.flushing = null;
    this.flushTimer = null;
    // A view in a share: rendered from the recording, nothing sent to the server, nothing recorded.
    this.readonly = section.dataset.readonly === "true";
    var host = this;
    section.querySelector(".app-close").addEventListener("click", function () {
      host.close(true);
    });
  }

  Host.prototype.say = function (text) {
    this.state.textContent = text;
  };

  // One message for the timeline (as a frame of its own), with the verdict the host gave it.
  // ``caused``: the id on the timeline of the request a view's request made (the host's answer to the
  // view carries it, which links the two).
  Host.prototype.record = function (direction, message, violation, caused) {
    if (this.readonly) {
      return;
    }
    if (this.outbox.length >= OUTBOX_LIMIT) {
      this.dropped += 1;
      this.flushSoon();
      return;
    }
    var text = "";
    try {
      text = JSON.stringify(message);
    } catch (error) {
      text = "";
    }
    var kept = text && text.length <= MESSAGE_CHARS ? message : { truncated: true, size: text.length, head: text.slice(0, 4096) };
    var entry = { direction: direction, message: kept, violation: violation || "" };
    if (caused !== undefined && caused !== null) {
      entry.caused = caused;
    }
    this.outbox.push(entry);
    this.flushSoon();
  };

  Host.prototype.flushSoon = function () {
    var host = this;
    if (!this.flushTimer) {
      this.flushTimer = setTimeout(function () {
        host.flushTimer = null;
        host.flush();
      }, FLUSH_MS);
    }
  };

  // Send what waits, in order, one batch after another; resolves when all of it is recorded. Each
  // call runs after the one before, and sends until nothing waits (never by calling itself again
  // through the chain, which would wait on its own end).
  Host.prototype.flush = function () {
    var host = this;
    function send() {
      if (!host.outbox.length && !host.dropped) {
        return null;
      }
      var batch = host.outbox.splice(0, BATCH);
      var dropped = host.dropped;
      host.dropped = 0;
      var body = { view: host.section.dataset.uri, messages: batch, dropped: dropped };
      return post(host.section.dataset.messagesUrl, body, true, true)
        .catch(function (error) {
          host.say("the timeline did not take the view's messages: " + error.message);
        })
        .then(send);
    }
    this.flushing = (this.flushing || Promise.resolve()).then(send);
    return this.flushing;
  };

  // The page is going away: what waits goes now, without waiting for a batch in flight, in a request
  // the browser finishes after the page is gone (an ordinary one is cancelled with it). Such requests
  // share a small budget, so what does not fit goes as a count: the timeline marks it missing.
  Host.prototype.flushNow = function () {
    if (this.readonly || (!this.outbox.length && !this.dropped)) {
      return;
    }
    var waiting = this.outbox.splice(0);
    var dropped = this.dropped;
    this.dropped = 0;
    var body = { view: this.section.dataset.uri, messages: [], dropped: 0 };
    var size = bytes(JSON.stringify(body)) + 16;
    for (var i = 0; i < waiting.length; i += 1) {
      var more = bytes(JSON.stringify(waiting[i])) + 1;
      if (size + more > KEEPALIVE_BYTES) {
        dropped += waiting.length - i;
        break;
      }
      body.messages.push(waiting[i]);
      size += more;
    }
    body.dropped = dropped;
    post(this.section.dataset.messagesUrl, body, true, true).catch(function () {});
  };

  Host.prototype.log = function (direction, message, note) {
    this.logged += 1;
    this.logCount.textContent = String(this.logged);
    var second = Math.floor(Date.now() / 1000);
    if (second !== this.second) {
      this.second = second;
      this.shownThisSecond = 0;
    }
    this.shownThisSecond += 1;
    if (this.shownThisSecond > SHOWN_PER_SECOND) {
      return; // counted above, and recorded for the timeline as far as its cap allows
    }
    var item = document.createElement("li");
    item.className = "app-log-entry";
    item.dataset.direction = direction;
    var arrow = document.createElement("span");
    arrow.className = "app-log-arrow";
    arrow.textContent = direction === "in" ? "view → host" : "host → view";
    var what = document.createElement("code");
    what.className = "app-log-method";
    what.textContent = message.method || (message.error ? "error #" + message.id : "result #" + message.id);
    var body = document.createElement("span");
    body.className = "app-log-body muted";
    body.textContent = short(message.params || message.result || message.error || {});
    item.append(arrow, " ", what, " ", body);
    if (note) {
      var extra = document.createElement("span");
      extra.className = "app-log-note";
      extra.textContent = " " + note;
      item.append(extra);
    }
    this.logList.append(item);
    while (this.logList.children.length > LOG_LIMIT) {
      this.logList.firstElementChild.remove();
    }
  };

  Host.prototype.start = function () {
    var host = this;
    if (this.readonly) {
      var recorded = this.section.querySelector('script[type="application/json"]');
      this.render({
        uri: this.section.dataset.uri,
        frame: this.section.dataset.frameUrl,
        call: recorded ? JSON.parse(recorded.textContent) : null,
        read_rpc_id: "",
        mime_ok: true,
        ui: {},
        tool: null,
      });
      this.say("rendered from the recorded resources/read #" + this.section.dataset.readSeq + ": read-only, no network");
      return;
    }
    var form = new FormData();
    form.append("name", this.tool);
    form.append("rpc_id", this.rpcId);
    this.say("reading the view with resources/read…");
    post(this.section.dataset.openUrl, form, false)
      .then(function (opened) {
        host.render(opened);
      })
      .catch(function (error) {
        host.say("the view could not be opened: " + error.message);
        host.section.dataset.state = "failed";
      });
  };

  Host.prototype.render = function (opened) {
    var host = this;
    if (this.gone) {
      return;
    }
    this.askPermissions(opened.ui, function (granted) {
      host.frameFor(opened, granted);
    });
  };

  Host.prototype.frameFor = function (opened, granted) {
    if (this.gone) {
      return;
    }
    this.opened = opened;
    this.granted = granted;
    this.call = opened.call;
    var frame = document.createElement("iframe");
    // Scripts only: no allow-same-origin (an opaque origin), no forms, popups or top navigation.
    frame.setAttribute("sandbox", "allow-scripts");
    if (granted.length) {
      frame.setAttribute("allow", this.permissionPolicy(granted));
    }
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.setAttribute("title", "View " + opened.uri);
    frame.className = "app-frame";
    frame.height = String(300);
    frame.src = opened.frame;
    this.frame = frame;
    this.slot.append(frame);
    if (opened.source && !this.section.querySelector(".app-source-open")) {
      // The resource's HTML and _meta.ui, read in the frame detail beside the timeline.
      var source = document.createElement("button");
      source.type = "button";
      source.className = "app-source-open";
      source.textContent = "Source";
      source.addEventListener("click", function () {
        htmx.ajax("GET", opened.source, { target: "#frame-detail" });
      });
      this.section.querySelector(".app-close").before(source, " ");
    }
    this.section.dataset.state = "loading";
    this.say(
      "rendered from resources/read #" + opened.read_rpc_id + (opened.mime_ok ? "" : " (mimeType " + opened.mime_type + ", not text/html;profile=mcp-app)")
    );
    hosts.push(this);
  };

  Host.prototype.send = function (message, violation, caused) {
    if (!this.frame || !this.frame.contentWindow) {
      return;
    }
    message.jsonrpc = "2.0";
    this.log("out", message);
    this.record("out", message, violation, caused);
    // The frame's origin is opaque: "*" is the only target origin that reaches it.
    this.frame.contentWindow.postMessage(message, "*");
  };

  Host.prototype.notify = function (method, params) {
    var message = { method: method, params: params };
    if (!this.initialized) {
      this.held.push(message);
      return;
    }
    this.send(message);
  };

  Host.prototype.request = function (method, params) {
    var host = this;
    var id = "host-" + this.nextId++;
    return new Promise(function (resolve) {
      host.pending[id] = resolve;
      host.send({ id: id, method: method, params: params });
    });
  };

  Host.prototype.reply = function (id, result) {
    this.send({ id: id, result: result });
  };

  Host.prototype.fail = function (id, code, message) {
    this.send({ id: id, error: { code: code, message: message } });
  };

  Host.prototype.capabilities = function () {
    var capabilities = {
      openLinks: {},
      logging: {},
      message: {},
      updateModelContext: {},
      sandbox: { csp: this.opened.ui.csp || {}, permissions: this.grantedPermissions() },
    };
    if (!this.readonly) {
      capabilities.serverTools = {};
      capabilities.serverResources = {};
    }
    return capabilities;
  };

  Host.prototype.grantedPermissions = function () {
    var granted = {};
    (this.granted || []).forEach(function (name) {
      granted[name] = {};
    });
    return granted;
  };

  Host.prototype.hostContext = function () {
    var width = this.slot.clientWidth || 0;
    var context = {
      theme: theme(),
      displayMode: this.mode || "inline",
      availableDisplayModes: Host.DISPLAY_MODES,
      containerDimensions: { width: width, maxHeight: MAX_HEIGHT },
      locale: navigator.language || "en",
      timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
      platform: "web",
      userAgent: "mcp-inspector",
    };
    if (this.opened && this.opened.tool) {
      context.toolInfo = { id: Number(this.rpcId), tool: this.opened.tool };
    }
    return context;
  };

  Host.prototype.receive = function (message) {
    var second = Math.floor(Date.now() / 1000);
    if (second !== this.heardSecond) {
      this.heardSecond = second;
      this.heard = 0;
    }
    this.heard += 1;
    if (this.heard > HEARD_PER_SECOND) {
      this.ignore();
      return;
    }
    if (!message || typeof message !== "object" || message.jsonrpc !== "2.0") {
      this.log("in", { method: "(not JSON-RPC 2.0)", params: message }, "ignored");
      this.record("in", message === undefined ? null : message, "apps-not-jsonrpc");
      return;
    }
    this.log("in", message);
    if (message.method === undefined) {
      this.record("in", message);
      var resolve = this.pending[message.id];
      if (resolve) {
        delete this.pending[message.id];
        resolve(message);
      }
      return;
    }
    var isRequest = message.id !== undefined && message.id !== null;
    var params = message.params && typeof message.params === "object" ? message.params : {};
    var violation = "";
    if (message.method === "ui/notifications/size-changed" && !(Number(params.height) > 0 && Number.isFinite(Number(params.height)))) {
      violation = "apps-bad-size";
    } else if (isRequest && !this.initialized && !this.answeredInitialize && message.method !== "ui/initialize" && message.method !== "ping") {
      violation = "apps-before-initialize";
    }
    this.record("in", message, violation);
    if (!isRequest) {
      this.onNotification(message.method, params);
      return;
    }
    this.onRequest(message.id, message.method, params);
  };

  // Past its share of a second, a message is counted, not read; past the stopping point the frame is
  // removed, which ends the stream at its source (each message still costs the page an event).
  Host.prototype.ignore = function () {
    var host = this;
    this.ignored = (this.ignored || 0) + 1;
    this.dropped += 1;
    this.flushSoon();
    this.section.dataset.flooded = "true";
    if (this.heard > STOP_PER_SECOND && !this.gone) {
      this.stop();
      return;
    }
    if (!this.telling && !this.gone) {
      this.telling = true;
      window.requestAnimationFrame(function () {
        host.telling = false;
        if (!host.gone) {
          host.say("the view sends too many messages: " + host.ignored + " ignored");
        }
      });
    }
  };

  Host.prototype.stop = function () {
    var host = this;
    this.gone = true;
    if (this.frame) {
      this.frame.remove();
    }
    hosts = hosts.filter(function (other) {
      return other !== host;
    });
    this.section.dataset.state = "stopped";
    window.setTimeout(function () {
      host.say(
        "stopped: the view sent more than " + STOP_PER_SECOND + " messages in a second (" + host.ignored + " ignored, counted on the timeline)"
      );
      host.flush();
    }, FLUSH_MS);
  };

  Host.prototype.onNotification = function (method, params) {
    if (method === "ui/notifications/initialized") {
      this.initialized = true;
      this.section.dataset.state = "ready";
      this.say("the view is initialized");
      var held = this.held;
      this.held = [];
      held.forEach(this.send, this);
      this.deliverCall();
    } else if (method === "ui/notifications/size-changed") {
      var height = Number(params.height);
      if (Number.isFinite(height) && height > 0 && this.frame) {
        // The newest size once a frame: a view that sends thousands resizes the page once.
        this.height = String(Math.round(Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, height))));
        var host = this;
        if (!this.resizing) {
          this.resizing = true;
          window.requestAnimationFrame(function () {
            host.resizing = false;
            if (host.frame) {
              host.frame.height = host.height;
            }
          });
        }
      }
    } else if (method === "notifications/message") {
      // The view's log line: shown in the log above, nothing else to do.
    }
  };

  Host.prototype.deliverCall = function () {
    var call = this.call;
    if (!call) {
      return;
    }
    this.notify("ui/notifications/tool-input", { arguments: call.arguments || {} });
    if (call.result) {
      this.notify("ui/notifications/tool-result", call.result);
    } else if (call.error) {
      this.notify("ui/notifications/tool-cancelled", { reason: call.error.message || "the call failed" });
    }
  };

  Host.prototype.onRequest = function (id, method, params) {
    var host = this;
    if (method === "ui/initialize") {
      this.answeredInitialize = true;
      var asked = params.protocolVersion;
      var declared = params.appCapabilities && params.appCapabilities.availableDisplayModes;
      this.viewModes = Array.isArray(declared) ? declared.slice(0, 10) : ["inline"];
      this.reply(id, {
        protocolVersion: PROTOCOL_VERSIONS.indexOf(asked) >= 0 ? asked : PROTOCOL_VERSIONS[0],
        hostInfo: { name: "mcp-inspector", version: "0.1.0" },
        hostCapabilities: this.capabilities(),
        hostContext: this.hostContext(),
      });
    } else if (method === "ping") {
      this.reply(id, {});
    } else if ((method === "tools/call" || method === "resources/read") && this.readonly) {
      var why = this.section.dataset.readonlyWhy || "read-only";
      this.fail(id, -32603, why + ": the view, drawn from the recording, cannot call tools or read resources");
    } else if (method === "tools/call" || method === "resources/read") {
      // The view's message is on the timeline before the request it causes.
      this.flush()
        .then(function () {
          return post(host.section.dataset.requestUrl, { method: method, params: params }, true);
        })
        .then(function (answer) {
          var note = answer.rpc_id !== undefined && answer.rpc_id !== null ? "→ " + method + " #" + answer.rpc_id : "";
          if (answer.error) {
            host.log("in", { method: method, params: params }, "refused or failed: " + answer.error.message);
            host.send({ id: id, error: answer.error }, answer.refused || "", answer.rpc_id);
          } else {
            if (note) {
              host.log("in", { method: method, params: params }, note + " on the timeline");
            }
            host.send({ id: id, result: answer.result }, "", answer.rpc_id);
          }
        })
        .catch(function (error) {
          host.fail(id, -32603, error.message);
        });
    } else if (method === "ui/open-link") {
      this.askToOpen(id, params.url);
    } else if (method === "ui/message" || method === "ui/update-model-context") {
      this.showForModel(method, params);
      this.reply(id, {});
    } else if (method === "ui/request-display-mode") {
      this.reply(id, { mode: this.requestDisplayMode(params.mode) });
    } else {
      this.fail(id, -32601, "the host does not handle " + String(method).slice(0, 100));
    }
  };

  // Teardown before the frame goes: asked, and waited for (a little) when the person closes it.
  Host.prototype.close = function (wait) {
    var host = this;
    if (this.gone) {
      return Promise.resolve();
    }
    this.gone = true;
    var removed = function () {
      if (host.frame) {
        host.frame.remove();
      }
      hosts = hosts.filter(function (other) {
        return other !== host;
      });
      host.section.dataset.state = "closed";
      host.say("closed");
    };
    if (!this.frame || !this.initialized) {
      removed();
      return Promise.resolve();
    }
    var asked = this.request("ui/resource-teardown", {});
    if (!wait) {
      removed();
      return this.flush();
    }
    var timeout = new Promise(function (resolve) {
      setTimeout(resolve, TEARDOWN_WAIT_MS);
    });
    return Promise.race([asked, timeout]).then(function () {
      removed();
      return host.flush();
    });
  };

  function hostOf(source) {
    for (var i = 0; i < hosts.length; i += 1) {
      if (hosts[i].frame && hosts[i].frame.contentWindow === source) {
        return hosts[i];
      }
    }
    return null;
  }

  window.addEventListener("message", function (event) {
    var host = hostOf(event.source);
    // A view being torn down is heard only for its answers (the teardown's among them).
    if (host && (!host.gone || (event.data && event.data.method === undefined))) {
      host.receive(event.data);
    }
  });

  // A view opens once its call has an answer: the card the server drew may still be running, and
  // finishes over the live socket.
  function whenAnswered(section, then) {
    var card = document.getElementById("call-" + section.dataset.rpcId);
    if (!card || !card.classList.contains("running")) {
      then();
      return;
    }
    var observer = new MutationObserver(function () {
      var now = document.getElementById("call-" + section.dataset.rpcId);
      if (!now || !now.classList.contains("running")) {
        observer.disconnect();
        then();
      }
    });
    observer.observe(card.parentNode, { childList: true, subtree: true, attributes: true, attributeFilter: ["class"] });
  }

  function mount(root) {
    var sections = root.matches && root.matches("section.app-view") ? [root] : [];
    if (root.querySelectorAll) {
      sections = sections.concat(Array.prototype.slice.call(root.querySelectorAll("section.app-view")));
    }
    sections.forEach(function (section) {
      if (section.dataset.mounted) {
        return;
      }
      section.dataset.mounted = "1";
      var host = new Host(section);
      section.appsHost = host;
      if (section.dataset.deferred === "true") {
        // Opened again later (a call's frame detail): it reads the view again, so only on request.
        var open = document.createElement("button");
        open.type = "button";
        open.textContent = "Open view";
        open.addEventListener("click", function () {
          open.remove();
          host.start();
        });
        section.querySelector(".app-close").before(open, " ");
        return;
      }
      whenAnswered(section, function () {
        host.start();
      });
    });
  }

  // A listing that brought the first view brings the tab bar with the Apps tab in an inert template.
  // The missing tabs are added to the page's bar in place: a tab's request on its way keeps its
  // element in the page (htmx looks for its out-of-band targets from there).
  function tabsAgain(root) {
    var template = root.matches && root.matches("template[data-tabs-again]") ? root : null;
    if (!template && root.querySelector) {
      template = root.querySelector("template[data-tabs-again]");
    }
    if (!template) {
      return;
    }
    var tabs = document.getElementById("tabs");
    var fresh = template.content.querySelector("#tabs");
    template.remove();
    if (!tabs || !fresh) {
      return;
    }
    var tabList = Array.prototype.slice.call(fresh.querySelectorAll('[role="tab"]'));
    tabList.forEach(function (tab, index) {
      if (document.getElementById(tab.id)) {
        return;
      }
      var added = document.importNode(tab, true);
      added.setAttribute("aria-selected", "false");
      added.setAttribute("tabindex", "-1");
      added.classList.remove("active");
      var next = null;
      for (var k = index + 1; k < tabList.length && !next; k += 1) {
        next = document.getElementById(tabList[k].id);
      }
      tabs.insertBefore(added, next);
      htmx.process(added);
    });
  }

  // What the person sees beyond the frame (apps-ui.js) is added to the host from there.
  window.InspectorApps = { Host: Host, post: post };

  document.addEventListener("htmx:load", function (event) {
    tabsAgain(event.target);
    mount(event.target);
  });
  document.addEventListener("DOMContentLoaded", function () {
    mount(document.body);
  });
  // A view whose place is swapped away (another tab, a reload of the list) is torn down first.
  document.addEventListener("htmx:beforeCleanupElement", function (event) {
    var section = event.target;
    if (section.appsHost) {
      section.appsHost.close(false);
    }
  });
  window.addEventListener("pagehide", function () {
    hosts.slice().forEach(function (host) {
      host.close(false);
      host.flushNow();
    });
  });
  // The theme switch: the views hear of it as a host context change.
  new MutationObserver(function () {
    hosts.forEach(function (host) {
      if (host.initialized) {
        host.notify("ui/notifications/host-context-changed", { theme: theme() });
      }
    });
  }).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
})();
