// An "Authorize at" card opens its authorization page by itself. The card asks the server whether this
// tab is the one to open it (one tab of the person who started the authorization, once:
// templates/sessions/oauth/_opening.html); the card's button stays for a browser that blocks the tab.
(function () {
  "use strict";

  // A card the live socket draws again asks nothing more: it shows the answer its first drawing got,
  // now or when it comes.
  var asked = {};
  var answers = {};

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    if (!elt.matches || !elt.matches(".oauth-opening[hx-post]")) {
      return;
    }
    var url = elt.getAttribute("hx-post");
    if (asked[url]) {
      event.preventDefault();
      if (answers[url]) {
        // After htmx is done with this element, which it is still processing.
        Promise.resolve().then(function () {
          if (document.body.contains(elt)) {
            htmx.swap(elt, answers[url], { swapStyle: "outerHTML" });
          }
        });
      }
      return;
    }
    asked[url] = true;
    // Read from the answer itself, not from what htmx swaps in: the card may have been drawn again
    // meanwhile, and an answer to an element no longer shown raises no event the page hears.
    var xhr = event.detail.xhr;
    xhr.addEventListener("load", function () {
      if (xhr.status !== 200) {
        return;
      }
      answers[url] = xhr.responseText;
      var answer = document.createElement("template");
      answer.innerHTML = xhr.responseText;
      var marker = answer.content.querySelector("[data-open-authorization]");
      var target = marker ? marker.dataset.openAuthorization : "";
      if (/^https?:\/\//i.test(target)) {
        window.open(target, "_blank", "noopener,noreferrer");
      }
      // The card drawn again shows the answer too (htmx swaps it into the card that asked).
      var shown = document.getElementById(elt.id);
      if (shown && shown !== elt && !document.body.contains(elt)) {
        htmx.swap(shown, xhr.responseText, { swapStyle: "outerHTML" });
      }
    });
  });
})();
