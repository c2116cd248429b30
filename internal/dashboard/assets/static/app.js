// ClawConnect dashboard: keeps the page current over server-sent events.
// The server renders (and escapes) every fragment; this script only puts
// them in place, keeps keyboard focus where it was, and ticks the elapsed
// time of running tasks between events from the server's clock. Nothing
// is fetched on a timer: EventSource reconnects by itself.
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

  // Elapsed times: the server's "now" minus data-since, as the server
  // formats them (humanDuration).
  var skew = null; // server clock minus this browser's, in ms
  function human(ms) {
    if (ms < 0) return "0s";
    var s = ms / 1000;
    if (s < 60) return s.toFixed(1) + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m" + String(Math.floor(s) % 60).padStart(2, "0") + "s";
    return Math.floor(m / 60) + "h" + String(m % 60).padStart(2, "0") + "m";
  }
  function tick() {
    if (skew === null) return;
    var now = Date.now() + skew;
    var els = document.querySelectorAll("[data-since]");
    for (var i = 0; i < els.length; i++) {
      var since = Number(els[i].getAttribute("data-since"));
      if (since > 0) els[i].textContent = human(now - since);
    }
  }
  setInterval(tick, 1000);

  // focusKey names the focused element inside el so that it can be found
  // again in the replacement (by id, else by link target or form action).
  function focusKey(el) {
    var a = document.activeElement;
    if (!a || a === document.body || !el.contains(a)) return null;
    if (a.id) return "#" + CSS.escape(a.id);
    var href = a.getAttribute("href");
    if (href) return 'a[href="' + CSS.escape(href) + '"]';
    var form = a.form && a.form.getAttribute("action");
    if (form) return 'form[action="' + CSS.escape(form) + '"] ' + a.tagName.toLowerCase();
    return null;
  }

  // A form marked data-inline is submitted in place: the same POST, with
  // the same CSRF token (and the browser's Origin), and the server answers
  // with the outcome as text; the new state arrives over the stream, so
  // the page is not reloaded. Without this script the form posts and is
  // redirected back.
  function flash(text) {
    var main = document.getElementById("main");
    var el = main && main.querySelector(":scope > .flash");
    if (!main) return;
    if (!el) {
      el = document.createElement("p");
      el.className = "flash";
      el.setAttribute("role", "status");
      main.insertBefore(el, main.firstChild);
    }
    el.tabIndex = -1;
    el.textContent = text;
    el.focus({ preventScroll: false });
  }
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    if (!form.hasAttribute || !form.hasAttribute("data-inline") || !window.fetch) return;
    ev.preventDefault();
    var buttons = form.querySelectorAll("button");
    for (var i = 0; i < buttons.length; i++) buttons[i].disabled = true;
    fetch(form.getAttribute("action"), {
      method: "POST",
      credentials: "same-origin",
      headers: { "X-Dashboard-Inline": "1" },
      body: new URLSearchParams(new FormData(form))
    }).then(function (resp) {
      return resp.text().then(function (text) {
        flash(resp.ok ? text : "Refused: " + text.trim());
      });
    }, function () {
      flash("The request did not reach the server: check the connection and try again.");
    }).then(function () {
      // The stream replaces the form when the state changed; if it did
      // not, the buttons work again.
      for (var i = 0; i < buttons.length; i++) buttons[i].disabled = false;
    });
  });

  var es = new EventSource("/events?" + stream);
  es.addEventListener("live", function (ev) {
    var d = JSON.parse(ev.data);
    if (d && d.now) skew = d.now - Date.now();
    state("live", "on");
  });
  es.addEventListener("swap", function (ev) {
    var f = JSON.parse(ev.data);
    var el = document.getElementById(f.id);
    if (!el || el.innerHTML === f.html) return;
    var key = focusKey(el);
    el.innerHTML = f.html;
    if (key) {
      var again = el.querySelector(key);
      if (again) again.focus({ preventScroll: true });
    }
  });
  es.addEventListener("append", function (ev) {
    var f = JSON.parse(ev.data);
    var el = document.getElementById(f.id);
    if (!el) return;
    // Follow the log while the reader is at its end (of the list, which
    // scrolls by itself, and of the page).
    var listAtEnd = el.scrollTop + el.clientHeight >= el.scrollHeight - 40;
    var atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    el.insertAdjacentHTML("beforeend", f.html);
    if (listAtEnd) el.scrollTop = el.scrollHeight;
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
