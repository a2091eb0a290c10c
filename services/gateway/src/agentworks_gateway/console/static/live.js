// The console's live pages (N4): each element with data-live opens an EventSource on
// that URL. A "swap" event carries server-rendered HTML: each of its top-level elements
// replaces the element with its id on the page, or is appended to data-live-into.
// "end" closes the stream (the call ended); an "error" event is shown as an alert.
// The browser reconnects a dropped stream by itself; nothing here polls.
(function () {
  "use strict";

  function swap(html, into) {
    var template = document.createElement("template");
    template.innerHTML = html;
    Array.prototype.slice.call(template.content.children).forEach(function (node) {
      var shown = node.id && document.getElementById(node.id);
      if (shown) {
        shown.replaceWith(node);
      } else if (into) {
        into.appendChild(node);
      }
      if (window.htmx) {
        window.htmx.process(node);
      }
    });
  }

  function alertOf(data) {
    var message = "the live view stopped";
    try {
      message = JSON.parse(data).message || message;
    } catch (ignored) {}
    var p = document.createElement("p");
    p.className = "alert";
    p.setAttribute("role", "alert");
    p.textContent = message + " (reload the page to try again)";
    return p;
  }

  function open(element) {
    var into = document.getElementById(element.getAttribute("data-live-into") || "");
    var source = new EventSource(element.getAttribute("data-live"));
    source.addEventListener("swap", function (event) {
      swap(event.data, into);
    });
    source.addEventListener("end", function () {
      source.close();
    });
    source.addEventListener("error", function (event) {
      if (event.data) {  // the stream's own refusal, not a dropped connection
        source.close();
        element.after(alertOf(event.data));
      }
    });
  }

  function start() {
    document.querySelectorAll("[data-live]").forEach(open);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
