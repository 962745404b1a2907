// nerve console: keeps an open thread's page current over server-sent
// events. Each event is a patch: HTML the server rendered (and escaped),
// appended to or replacing an element by id. Without this script the page
// is complete as served; reloading shows the same.
(function () {
  "use strict";
  var root = document.querySelector("[data-live]");
  if (!root || !window.EventSource) {
    return;
  }
  var es = new EventSource(root.getAttribute("data-live"));
  es.onmessage = function (ev) {
    var p;
    try {
      p = JSON.parse(ev.data);
    } catch (e) {
      return;
    }
    var tpl = document.createElement("template");
    tpl.innerHTML = p.html;
    var node = tpl.content.firstElementChild;
    var target = document.getElementById(p.append || p.replace);
    if (node && node.id && document.getElementById(node.id)) {
      // Already shown (the page was rendered after it): refresh it.
      document.getElementById(node.id).replaceWith(node);
    } else if (node && target && p.append) {
      target.appendChild(node);
    } else if (node && target) {
      target.replaceWith(node);
    }
    if (p.append === "messages") {
      var none = document.getElementById("no-messages");
      if (none) {
        none.remove();
      }
    }
    if (p.end) {
      es.close();
    }
  };
})();
