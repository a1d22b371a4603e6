/* Evalsite: every htmx request's failure is shown on the page (one place for the whole site).
 *
 * htmx 2 drops 4xx/5xx answers by default: nothing changes on screen. Here:
 * - a 400/409/422 answer that is a fragment (a form re-rendered with its validation errors) is
 *   swapped into its target like a 200, so the errors appear beside the inputs;
 * - any other error answer (403, 404, 500, a whole error page) and a failed connection show a
 *   banner (#htmx-error, role=alert) with the status and the page's own message.
 * Loaded as a static file (no inline script: the site's CSP forbids them).
 */
(function () {
  "use strict";
  var FORM_ERRORS = [400, 409, 422];

  function banner() {
    var box = document.getElementById("htmx-error");
    if (!box) {
      box = document.createElement("div");
      box.id = "htmx-error";
      box.className = "htmx-error";
      box.setAttribute("role", "alert");
      box.hidden = true;
      var main = document.getElementById("content") || document.body;
      main.parentNode.insertBefore(box, main);
    }
    return box;
  }

  function show(message) {
    var box = banner();
    box.textContent = "";
    var text = document.createElement("span");
    text.textContent = message;
    var close = document.createElement("button");
    close.type = "button";
    close.className = "link";
    close.textContent = "dismiss";
    close.addEventListener("click", function () { box.hidden = true; });
    box.appendChild(text);
    box.appendChild(document.createTextNode(" "));
    box.appendChild(close);
    box.hidden = false;
  }

  function hide() {
    var box = document.getElementById("htmx-error");
    if (box) { box.hidden = true; }
  }

  function isWholePage(html) {
    return /^\s*<!doctype|^\s*<html/i.test(html || "");
  }

  /* The error page's own words: its first heading and paragraph, else the plain text. */
  function messageOf(xhr) {
    var body = xhr.responseText || "";
    var words = "";
    if (/<[a-z]/i.test(body)) {
      var doc = new DOMParser().parseFromString(body, "text/html");
      var main = doc.querySelector("#content") || doc.body;
      var heading = main && main.querySelector("h1");
      var para = main && main.querySelector(".error, .errorlist, p");
      words = [heading && heading.textContent, para && para.textContent]
        .filter(Boolean).map(function (s) { return s.trim(); }).join(": ");
    } else {
      words = body.trim();
    }
    return words.slice(0, 300);
  }

  document.addEventListener("htmx:beforeSwap", function (evt) {
    var xhr = evt.detail.xhr;
    if (xhr.status < 400) { hide(); return; }
    if (FORM_ERRORS.indexOf(xhr.status) >= 0 && xhr.responseText && !isWholePage(xhr.responseText)) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
      hide();
      return;
    }
    evt.detail.shouldSwap = false;
    var words = messageOf(xhr);
    show("The request failed (" + xhr.status + (xhr.statusText ? " " + xhr.statusText : "") + ")" +
      (words ? ": " + words : "."));
  });

  document.addEventListener("htmx:sendError", function () {
    show("The server did not answer: check your connection, or whether Evalsite is still running.");
  });
})();
