// Quire console: pages refresh their figures in place, and the tail page
// reads its server-sent events. Plain JavaScript, no build step.
(function () {
  "use strict";
  var every = Number(document.body.dataset.refresh) || 0;
  var conn = document.getElementById("conn");

  function lost(msg) { conn.hidden = false; conn.textContent = msg; }
  function found() { conn.hidden = true; conn.textContent = ""; }

  // A notice of a finished action is shown once, not on every refresh.
  if (location.search.indexOf("done=") >= 0 && window.history.replaceState) {
    var u = new URL(location.href);
    u.searchParams.delete("done");
    history.replaceState(null, "", u.pathname + u.search);
  }

  function refresh() {
    fetch(location.href, { cache: "no-store", headers: { "X-Console-Refresh": "1" } })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("content");
        var old = document.getElementById("content");
        if (fresh && old) old.replaceWith(fresh);
        found();
      })
      .catch(function (e) {
        lost("The console cannot be reached (" + e.message + "); retrying every " + every / 1000 + " s.");
      })
      .finally(function () { setTimeout(refresh, every); });
  }
  if (every > 0) setTimeout(refresh, every);

  var tail = document.getElementById("tail");
  if (!tail) return;
  var body = tail.querySelector("tbody");
  var status = document.getElementById("tail-status");
  var count = 0;

  function cell(tr, shown, cls) {
    var td = document.createElement("td");
    if (cls) td.className = cls;
    if (shown === null || shown === undefined) {
      td.textContent = "null";
      td.classList.add("null");
    } else {
      td.textContent = shown.text;
      if (shown.hex) { td.classList.add("hex"); td.title = "binary, shown as hex"; }
    }
    tr.appendChild(td);
    return td;
  }
  function text(tr, s, cls) {
    var td = document.createElement("td");
    td.textContent = s;
    if (cls) td.className = cls;
    tr.appendChild(td);
  }

  var es = new EventSource(tail.dataset.stream);
  es.addEventListener("start", function (ev) {
    renewing = false;
    status.className = "hint";
    status.textContent = count > 0 ? count + " records since the page opened." :
      "Reading from " + JSON.parse(ev.data) + " (partition:offset); new records appear at the top.";
  });
  es.addEventListener("ok", function () {
    status.className = "hint";
    status.textContent = "Reading again.";
  });
  es.addEventListener("problem", function (ev) {
    status.className = "error";
    status.textContent = JSON.parse(ev.data) + " (retrying)";
  });
  es.addEventListener("record", function (ev) {
    var r = JSON.parse(ev.data);
    var tr = document.createElement("tr");
    tr.className = "record";
    tr.dataset.offset = r.partition + "/" + r.offset;
    text(tr, String(r.partition));
    text(tr, String(r.offset), "num");
    text(tr, r.timestamp);
    cell(tr, r.key, "key");
    cell(tr, r.value, "value");
    var hs = document.createElement("td");
    hs.className = "headers";
    (r.headers || []).forEach(function (h) {
      var span = document.createElement("span");
      span.className = "header" + (h.value && h.value.hex ? " hex" : "");
      span.textContent = h.key + "=" + (h.value ? h.value.text : "null");
      hs.appendChild(span);
    });
    tr.appendChild(hs);
    body.insertBefore(tr, body.firstChild);
    count++;
    while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
    status.className = "hint";
    status.textContent = count + " records since the page opened.";
  });
  var renewing = false;
  es.addEventListener("renew", function () { renewing = true; });
  es.onerror = function () {
    if (renewing) { renewing = false; return; }
    status.className = "error";
    status.textContent = "The connection to the console was lost; retrying…";
  };
})();
