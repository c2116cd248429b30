// ClawConnect dashboard: keeps the page current over server-sent events.
// The server renders (and escapes) every fragment; this script only puts
// them in place. No polling: EventSource reconnects by itself.
(function () {
  "use strict";
  var stream = document.body.getAttribute("data-stream");
  if (!stream || !window.EventSource) return;
  var live = document.getElementById("live");
  function state(text, cls) {
    if (!live) return;
    live.textContent = text;
    live.className = "live " + cls;
  }
  var es = new EventSource("/events?" + stream);
  es.addEventListener("live", function () { state("live", "on"); });
  es.addEventListener("swap", function (ev) {
    var f = JSON.parse(ev.data);
    var el = document.getElementById(f.id);
    if (el && el.innerHTML !== f.html) el.innerHTML = f.html;
  });
  es.addEventListener("append", function (ev) {
    var f = JSON.parse(ev.data);
    var el = document.getElementById(f.id);
    if (!el) return;
    var atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    el.insertAdjacentHTML("beforeend", f.html);
    if (atEnd) window.scrollTo(0, document.body.scrollHeight);
  });
  es.addEventListener("gone", function (ev) {
    state(JSON.parse(ev.data), "off");
    es.close();
  });
  es.onerror = function () {
    // A refused stream (signed out) is closed for good; anything else
    // reconnects by itself.
    if (es.readyState === EventSource.CLOSED) state("offline: reload the page", "off");
    else state("reconnecting…", "off");
  };
  es.onopen = function () { state("live", "on"); };
})();
