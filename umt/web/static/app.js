// Live pages: the server pushes "change" (Server-Sent Events) and the page fetches itself
// again and swaps its live section. No polling: without a change, nothing is requested.
"use strict";
(function () {
  var live = document.getElementById("live");
  if (!live || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var state = document.getElementById("live-state");
  var busy = false;
  var again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (fresh) live.replaceChildren.apply(live, Array.from(fresh.childNodes));
      })
      .catch(function () {})
      .then(function () {
        busy = false;
        if (again) { again = false; window.setTimeout(refresh, 250); }
      });
  }

  var opened = false;
  var source = new EventSource(live.getAttribute("data-events"));
  source.addEventListener("change", refresh);
  source.onopen = function () {
    if (state) state.hidden = false;
    if (opened) refresh();  // reconnected: something may have changed meanwhile
    opened = true;
  };
  source.onerror = function () { if (state) state.hidden = true; };
})();
