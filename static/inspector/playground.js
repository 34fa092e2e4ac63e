// The Playground's chat: the composer empties once its message is sent, and the log shows its newest
// entry after each step (templates/sessions/playground/).
(function () {
  "use strict";

  document.addEventListener("htmx:afterRequest", function (event) {
    var elt = event.detail.elt;
    if (elt.matches && elt.matches("form.chat-composer") && event.detail.successful) {
      elt.reset();
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "chat-log") {
      target.scrollTop = target.scrollHeight;
    }
  });
})();
