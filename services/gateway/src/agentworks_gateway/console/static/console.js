// The console's times and ids (V7). Each <time datetime="ISO"> shows a relative time
// ("3 min ago", "in 2 h") in the browser's language, with the local absolute time as
// its title; they are refreshed each minute on the page (no request is made). Each
// button.copy[data-copy] copies its value. Content swapped in later (live.js, htmx) is
// formatted as it arrives. A page answering a form (data-replace-url) is reloaded as
// that URL, not by sending the form again.
(function () {
  "use strict";

  var UNITS = [
    ["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400],
    ["hour", 3600], ["minute", 60], ["second", 1]
  ];
  var relative = window.Intl && Intl.RelativeTimeFormat
    ? new Intl.RelativeTimeFormat(undefined, {numeric: "auto", style: "short"}) : null;
  var absolute = window.Intl
    ? new Intl.DateTimeFormat(undefined, {dateStyle: "medium", timeStyle: "medium"}) : null;

  function relativeText(date, now) {
    var seconds = (date.getTime() - now) / 1000;
    for (var i = 0; i < UNITS.length; i++) {
      if (Math.abs(seconds) >= UNITS[i][1] || UNITS[i][0] === "second") {
        var value = Math.round(seconds / UNITS[i][1]);
        if (UNITS[i][0] === "second" && Math.abs(seconds) < 10) {
          return relative.format(0, "second");
        }
        return relative.format(value, UNITS[i][0]);
      }
    }
    return "";
  }

  function format(root) {
    if (!relative || !absolute) {
      return;
    }
    var now = Date.now();
    var times = root.matches && root.matches("time[datetime]")
      ? [root] : root.querySelectorAll("time[datetime]");
    Array.prototype.forEach.call(times, function (element) {
      var date = new Date(element.getAttribute("datetime"));
      if (isNaN(date.getTime())) {
        return;
      }
      element.textContent = relativeText(date, now);
      element.title = absolute.format(date);
      element.setAttribute("data-formatted", "");
    });
  }

  function copied(button) {
    var label = button.textContent;
    button.textContent = "Copied";
    setTimeout(function () { button.textContent = label; }, 1500);
  }

  function copy(button) {
    var value = button.getAttribute("data-copy");
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(value).then(function () { copied(button); });
      return;
    }
    // Served over plain HTTP to another host: the clipboard API is not there.
    var area = document.createElement("textarea");
    area.value = value;
    area.setAttribute("readonly", "");
    area.className = "sr-only";
    document.body.appendChild(area);
    area.select();
    try {
      document.execCommand("copy");
      copied(button);
    } finally {
      area.remove();
    }
  }

  function start() {
    // A page that answers a form (an endpoint's secret, shown once) names the page it
    // stands for: reloading then reads that page instead of sending the form again.
    var answer = document.querySelector("[data-replace-url]");
    if (answer && window.history && window.history.replaceState) {
      window.history.replaceState(null, "", answer.getAttribute("data-replace-url"));
    }
    format(document);
    setInterval(function () { format(document); }, 60000);
    new MutationObserver(function (changes) {
      changes.forEach(function (change) {
        Array.prototype.forEach.call(change.addedNodes, function (node) {
          if (node.nodeType === 1) {
            format(node);
          }
        });
      });
    }).observe(document.body, {childList: true, subtree: true});
    document.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("button.copy[data-copy]");
      if (button) {
        copy(button);
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
