// EchoMQ dashboard: refresh the parts of a page marked data-poll, every few seconds while the
// tab is visible. The server renders (and escapes) every fragment; this only swaps it in, so
// the list a user is reading stays where it is. No inline script: the CSP allows this file only.
(function () {
  "use strict";
  var PERIOD_MS = 3000;

  function inUse(element) {
    // a form control the user has focused (about to click, typing in) is never swapped away
    var focused = document.activeElement;
    return focused !== null && focused !== document.body && element.contains(focused);
  }

  function refresh(element) {
    if (element.dataset.busy === "1" || inUse(element)) { return; }
    element.dataset.busy = "1";
    fetch(element.dataset.poll, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (answer) { return answer.ok ? answer.text() : null; })
      .then(function (html) {
        if (html !== null && html !== element.dataset.last && !inUse(element)) {
          element.innerHTML = html;
          element.dataset.last = html;
          element.dispatchEvent(new CustomEvent("echomq:refreshed", { bubbles: true }));
        }
      })
      .catch(function () { /* Redis or the server away: the next round tries again */ })
      .finally(function () { element.dataset.busy = "0"; });
  }

  function tick() {
    if (document.hidden) { return; }
    document.querySelectorAll("[data-poll]").forEach(refresh);
  }

  document.addEventListener("DOMContentLoaded", function () {
    var period = Number(document.body.dataset.pollMs || PERIOD_MS);
    window.setInterval(tick, period);
  });
})();
