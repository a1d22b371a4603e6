/* Evalsite: keyboard navigation on the run, compare, case and compare-case pages.
 *
 * j / k   highlight the next / previous row of the page's table (tbody.key-rows)
 * Enter   open the highlighted row (its a.row-link: the case page, or A vs B side by side)
 * n / p   next / previous case on a case page or a compare-case page (a#next-case / a#previous-case)
 * /       focus the search box (the full-text input[name=text], else the case-id input[name=q])
 * ?       show or hide the keys help line (#keys-help); Esc hides it and clears the highlight
 * Keys are ignored while typing in a field, with Ctrl/Alt/Meta, and on the review queue (review.js
 * has its own keys there). Loaded on every page as a static file (the CSP forbids inline
 * scripts); it reads the page at each key press, so htmx swaps need no re-initialisation, and it
 * is safe to load twice.
 */
(function () {
  "use strict";
  if (window.evalsiteNavKeys) { return; }
  window.evalsiteNavKeys = true;

  function rows() {
    var body = document.querySelector("tbody.key-rows");
    if (!body) { return []; }
    return Array.prototype.filter.call(body.querySelectorAll(":scope > tr"), function (row) {
      return !row.classList.contains("placeholder") && row.querySelector("a.row-link");
    });
  }

  function move(step) {
    var list = rows();
    if (!list.length) { return false; }
    var index = -1;
    for (var i = 0; i < list.length; i++) { if (list[i].classList.contains("key-current")) { index = i; } }
    var next = index < 0 ? (step > 0 ? 0 : list.length - 1) : Math.min(Math.max(index + step, 0), list.length - 1);
    if (index >= 0) { list[index].classList.remove("key-current"); list[index].removeAttribute("aria-current"); }
    list[next].classList.add("key-current");
    list[next].setAttribute("aria-current", "true");
    list[next].scrollIntoView({ block: "nearest" });
    return true;
  }

  function openCurrent() {
    var row = document.querySelector("tbody.key-rows > tr.key-current");
    var link = row && row.querySelector("a.row-link");
    if (!link) { return false; }
    link.click();
    return true;
  }

  function follow(id) {
    var link = document.getElementById(id);
    if (!link) { return false; }
    link.click();
    return true;
  }

  function typing(target) {
    var tag = (target && target.tagName) || "";
    if (target && target.isContentEditable) { return true; }
    return tag === "TEXTAREA" || tag === "SELECT" || (tag === "INPUT" && target.type !== "radio" && target.type !== "checkbox");
  }

  document.addEventListener("keydown", function (event) {
    if (document.getElementById("review-panel") || event.altKey || event.metaKey || event.ctrlKey) { return; }
    var target = event.target;
    if (typing(target)) {
      if (event.key === "Escape") { target.blur(); }
      return;
    }
    var key = event.key;
    var help = document.getElementById("keys-help");
    var done = false;
    if (key === "?" && help) { help.hidden = !help.hidden; done = true; }
    else if (key === "Escape") {
      if (help) { help.hidden = true; }
      var current = document.querySelector("tbody.key-rows > tr.key-current");
      if (current) { current.classList.remove("key-current"); current.removeAttribute("aria-current"); }
    }
    else if (key === "j") { done = move(1); }
    else if (key === "k") { done = move(-1); }
    else if (key === "Enter") {
      // Enter on a focused link or button keeps its own meaning
      var tag = (target && target.tagName) || "";
      if (tag !== "A" && tag !== "BUTTON" && tag !== "SUMMARY") { done = openCurrent(); }
    }
    else if (key === "n") { done = follow("next-case"); }
    else if (key === "p") { done = follow("previous-case"); }
    else if (key === "/") {
      var search = document.querySelector("input[name=text]") || document.querySelector("input[name=q]");
      if (search) { search.focus(); search.select(); done = true; }
    }
    if (done) { event.preventDefault(); }
  });
})();
