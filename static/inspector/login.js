// Exchange the one-time token in the URL for a session: first take the token out of the
// address bar (and so out of history), then POST it with the page's CSRF token.
"use strict";
(function () {
  const form = document.getElementById("token-login");
  if (!form || !form.elements.token.value) return;
  history.replaceState(null, "", location.pathname);
  form.submit();
})();
